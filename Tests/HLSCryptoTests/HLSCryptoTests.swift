import Foundation
import HLSCrypto
import HLSTestSupport
import Testing

func hexBytes(_ hex: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var iterator = hex.utf8.makeIterator()
    while let high = iterator.next(), let low = iterator.next() {
        bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)!)
    }
    return bytes
}

@Suite struct SHA256Tests {
    @Test func nistAbc() {
        #expect(SHA256.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.digest(Array("abc".utf8)).count == 32)
    }

    @Test func emptyAndTwoBlockMessage() {
        #expect(SHA256.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            SHA256.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func nonContiguousInputMatchesArray() {
        let bytes = Array("hello world".utf8)
        #expect(SHA256.hex(bytes.lazy.map { $0 }) == SHA256.hex(bytes))
    }
}

@Suite struct AES128CBCTests {
    // NIST SP 800-38A, F.2.1 / F.2.2 CBC-AES128.
    let key = hexBytes("2b7e151628aed2a6abf7158809cf4f3c")
    let iv = hexBytes("000102030405060708090a0b0c0d0e0f")
    let plaintext = hexBytes(
        "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
            + "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
    let ciphertext = hexBytes(
        "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"
            + "73bed6b8e3c1743b7116e69e222295163ff1caa1681fac09120eca307586e1a7")

    @Test func nistVectorWithoutPadding() throws {
        #expect(try AES128CBC.decrypt(ciphertext, key: key, iv: iv, padding: false) == plaintext)
        #expect(try AES128CBC.encrypt(plaintext, key: key, iv: iv, padding: false) == ciphertext)
    }

    @Test func paddedRoundTripOfEveryLength() throws {
        for length in 0...33 {
            let data = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 7) }
            let encrypted = try AES128CBC.encrypt(data, key: key, iv: iv)
            #expect(encrypted.count == (length / 16 + 1) * 16)
            #expect(try AES128CBC.decrypt(encrypted, key: key, iv: iv) == data)
        }
    }

    @Test func rejectsBadSizesAndPadding() throws {
        #expect(throws: CryptoError.invalidKeyLength) { try AES128CBC.decrypt(ciphertext, key: [1, 2], iv: iv) }
        #expect(throws: CryptoError.invalidIVLength) { try AES128CBC.decrypt(ciphertext, key: key, iv: []) }
        #expect(throws: CryptoError.invalidInputLength) {
            try AES128CBC.decrypt(ciphertext.dropLast(), key: key, iv: iv)
        }
        // The NIST plaintext is not padded, so decrypting with padding must fail (its last byte is 0x10
        // but the block is not sixteen 0x10 bytes).
        #expect(throws: CryptoError.badPadding) { try AES128CBC.decrypt(ciphertext, key: key, iv: iv) }
    }

    @Test func paddingCheckOnTwoBlocksAndOneBlock() throws {
        let data = Array(repeating: UInt8(0xAB), count: 1000)
        let encrypted = try AES128CBC.encrypt(data, key: key, iv: iv)
        #expect(try AES128CBC.hasValidPadding(lastTwoBlocks: encrypted.suffix(32), key: key, iv: [UInt8](repeating: 0, count: 16)))
        let wrongKey = hexBytes("000102030405060708090a0b0c0d0e0f")
        #expect(try !AES128CBC.hasValidPadding(lastTwoBlocks: encrypted.suffix(32), key: wrongKey, iv: iv))
        // Truncation: the last two blocks are now mid-stream blocks whose plaintext is 0xAB filler.
        #expect(try !AES128CBC.hasValidPadding(lastTwoBlocks: encrypted.dropLast(16).suffix(32), key: key, iv: iv))
        // A single-block ciphertext uses the real IV.
        let short = try AES128CBC.encrypt([1, 2, 3], key: key, iv: iv)
        #expect(short.count == 16)
        #expect(try AES128CBC.hasValidPadding(lastTwoBlocks: short, key: key, iv: iv))
        #expect(try !AES128CBC.hasValidPadding(lastTwoBlocks: short, key: key, iv: key))
        #expect(try !AES128CBC.hasValidPadding(lastTwoBlocks: short.dropLast(), key: key, iv: iv))
        // The NIST ciphertext has no padding.
        #expect(try !AES128CBC.hasValidPadding(lastTwoBlocks: ciphertext.suffix(32), key: key, iv: iv))
    }

    @Test func crossCheckWithOpenSSLCommandLine() async throws {
        try await onOwnThread { try crossCheckWithOpenSSLCommandLineBlocking() }
    }

    /// Long and blocking: runs on a thread of its own (``onOwnThread(_:)``).
    func crossCheckWithOpenSSLCommandLineBlocking() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscrypto-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for length in [0, 1, 15, 16, 17, 4096, 188 * 1000 + 5] {
            let key = try SecureRandom.bytes(16)
            let iv = try SecureRandom.bytes(16)
            let data = try SecureRandom.bytes(length)
            let plainURL = directory.appendingPathComponent("plain-\(length)")
            let cipherURL = directory.appendingPathComponent("cipher-\(length)")
            let backURL = directory.appendingPathComponent("back-\(length)")
            try Data(data).write(to: plainURL)
            let hexKey = SHA256.hexString(key)
            let hexIV = SHA256.hexString(iv)

            // openssl encrypts, we decrypt.
            try runOpenSSL(["enc", "-aes-128-cbc", "-K", hexKey, "-iv", hexIV, "-in", plainURL.path, "-out", cipherURL.path])
            let theirs = try [UInt8](Data(contentsOf: cipherURL))
            #expect(try AES128CBC.decrypt(theirs, key: key, iv: iv) == data)
            #expect(try AES128CBC.hasValidPadding(lastTwoBlocks: theirs.suffix(theirs.count >= 32 ? 32 : 16), key: key, iv: iv))

            // We encrypt, openssl decrypts.
            let ours = try AES128CBC.encrypt(data, key: key, iv: iv)
            #expect(ours == theirs)
            try Data(ours).write(to: cipherURL)
            try runOpenSSL(["enc", "-d", "-aes-128-cbc", "-K", hexKey, "-iv", hexIV, "-in", cipherURL.path, "-out", backURL.path])
            #expect(try [UInt8](Data(contentsOf: backURL)) == data)
        }
    }

    private func runOpenSSL(_ arguments: [String]) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "openssl \(arguments.joined(separator: " "))")
    }
}

@Suite struct AES256GCMTests {
    @Test func roundTripWithAndWithoutAAD() throws {
        let key = try SecureRandom.bytes(32)
        for plaintext in [[], [0x42], try SecureRandom.bytes(16), try SecureRandom.bytes(1000)] as [[UInt8]] {
            let box = try AES256GCM.seal(plaintext, key: key, aad: Array("key-1".utf8))
            #expect(box.count == 12 + plaintext.count + 16)
            #expect(try AES256GCM.open(box, key: key, aad: Array("key-1".utf8)) == plaintext)
            let plain = try AES256GCM.seal(plaintext, key: key)
            #expect(try AES256GCM.open(plain, key: key) == plaintext)
        }
    }

    @Test func freshNonceEverySeal() throws {
        let key = try SecureRandom.bytes(32)
        let a = try AES256GCM.seal([1, 2, 3], key: key)
        let b = try AES256GCM.seal([1, 2, 3], key: key)
        #expect(a != b)
    }

    @Test func detectsTamperingWrongKeyAndWrongAAD() throws {
        let key = try SecureRandom.bytes(32)
        let box = try AES256GCM.seal(Array("sixteen byte key".utf8), key: key, aad: [7])
        for index in [0, 11, 12, 20, box.count - 1] {
            var tampered = box
            tampered[index] ^= 0x01
            #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(tampered, key: key, aad: [7]) }
        }
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(box, key: try SecureRandom.bytes(32), aad: [7]) }
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(box, key: key, aad: [8]) }
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(box, key: key) }
        #expect(throws: CryptoError.invalidInputLength) { try AES256GCM.open(box.prefix(27), key: key, aad: [7]) }
        #expect(throws: CryptoError.invalidKeyLength) { try AES256GCM.seal([1], key: [1]) }
    }

    @Test func knownAnswerFromNISTGCMTestCase14() throws {
        // McGrew & Viega GCM spec, test case 14: 256-bit zero key, zero 96-bit IV, one zero block.
        // seal() draws its own nonce, so build the box by hand and check open() accepts it.
        let key = [UInt8](repeating: 0, count: 32)
        let box =
            [UInt8](repeating: 0, count: 12)
            + hexBytes("cea7403d4d606b6e074ec5d3baf39d18") + hexBytes("d0d1c8a799996bf0265b98b5d48ab919")
        #expect(try AES256GCM.open(box, key: key) == [UInt8](repeating: 0, count: 16))
    }
}

@Suite struct SecureRandomTests {
    @Test func producesRequestedCountsAndDiffers() throws {
        #expect(try SecureRandom.bytes(0).isEmpty)
        let a = try SecureRandom.bytes(32)
        let b = try SecureRandom.bytes(32)
        #expect(a.count == 32 && b.count == 32 && a != b)
    }
}

/// HMAC-SHA256 against RFC 4231's test vectors (the webhook signatures).
@Suite struct HMACSHA256Tests {
    private func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    @Test func rfc4231Vectors() {
        // Test case 1: 20 bytes of 0x0b, "Hi There".
        #expect(
            SHA256.hexString(HMACSHA256.authenticationCode(for: Array("Hi There".utf8), key: [UInt8](repeating: 0x0b, count: 20)))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        // Test case 2: key "Jefe".
        #expect(
            HMACSHA256.hex("what do ya want for nothing?", key: "Jefe")
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        // Test case 6: a key longer than the block (131 bytes of 0xaa) is hashed first.
        #expect(
            SHA256.hexString(
                HMACSHA256.authenticationCode(
                    for: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8), key: [UInt8](repeating: 0xaa, count: 131)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        #expect(HMACSHA256.authenticationCode(for: [], key: []).count == 32)
    }

    @Test func verificationIsExactAndCaseInsensitive() {
        let tag = HMACSHA256.hex("payload", key: "secret-secret-secret")
        #expect(HMACSHA256.isValid(tag, for: "payload", key: "secret-secret-secret"))
        #expect(HMACSHA256.isValid(tag.uppercased(), for: "payload", key: "secret-secret-secret"))
        #expect(!HMACSHA256.isValid(tag, for: "payload!", key: "secret-secret-secret"))
        #expect(!HMACSHA256.isValid(String(tag.dropLast()), for: "payload", key: "secret-secret-secret"))
        #expect(!HMACSHA256.isValid(tag, for: "payload", key: "another-secret-key"))
    }
}
