import Foundation
import HLSCacheStore
import HLSKeys
import HLSOrigin

extension Downloader {
    /// Stores one AES-128 key for `item` and returns its size.
    ///
    /// The only place keys are fetched and stored: for now a key is a plain `.key` object (expiring with the
    /// item), which the proxy serves like any resource. The encrypted key store (DESIGN.md §7) replaces this
    /// function's body.
    /// - Throws: ``DownloadError/keyUnavailable`` when the key cannot be fetched or is not 16 bytes.
    func storeKey(_ resource: PlannedResource, for item: DownloadItem) async throws -> Int64 {
        if let keys {
            // The key store fetches (with the origin's configured headers), checks the 16 bytes, seals it under
            // the master key and keeps it until the item's expiry; the proxy serves it from /keys/{id}.
            do {
                let id = try keys.register(resource.url, expiresAt: item.expiresAt)
                _ = try await keys.key(id)
                return 16
            } catch {
                throw DownloadError.keyUnavailable.with("key \(resource.url): \(error.message)")
            }
        }
        let headers = item.headers.map { ($0.name, $0.value) }
        let bytes: [UInt8]
        do {
            let response = try await withRetries(resource.url) {
                try await self.origin.fetch(resource.url, headers: headers, maxBytes: 1024)
            }
            bytes = [UInt8](response.body.readableBytesView)
        } catch let error as DownloadError where error == .cancelled {
            throw error
        } catch {
            throw DownloadError.keyUnavailable.with("key \(resource.url): \(error)")
        }
        guard bytes.count == 16 else {
            throw DownloadError.keyUnavailable.with("key \(resource.url) is \(bytes.count) bytes, not 16")
        }
        let locked = item.locked
        let expiresAt = item.expiresAt
        try await threadPool.runIfActive { [store] in
            let writer = try store.makeWriter(for: resource.key, expectedLength: 16)
            do {
                try writer.write(bytes)
                _ = try writer.finish(contentType: "application/octet-stream", kind: .key, expiresAt: expiresAt, locked: locked)
            } catch {
                writer.abort()
                throw error
            }
        }
        return 16
    }
}
