import HLSCrypto

extension MasterKey {
    /// Seals `plain` with AES-256-GCM under this key, bound to `context` (additional data: a sealed box copied
    /// under another context does not open). For secrets other modules keep at rest (an item's request headers).
    /// - Throws: ``KeyError/storage`` when OpenSSL fails.
    package func seal(_ plain: [UInt8], context: String) throws(KeyError) -> [UInt8] {
        do {
            return try AES256GCM.seal(plain, key: bytes, aad: Array(context.utf8))
        } catch {
            throw KeyError.storage.with("cannot seal \(context): \(error)")
        }
    }

    /// Opens a box made by ``seal(_:context:)``; `nil` under another master key, another context, or damage.
    package func unseal(_ sealed: [UInt8], context: String) -> [UInt8]? {
        try? AES256GCM.open(sealed, key: bytes, aad: Array(context.utf8))
    }
}
