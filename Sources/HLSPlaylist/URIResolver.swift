/// Resolves the references of one playlist against its own URL.
///
/// Built once per playlist; the common case (a plain relative file name such as `seg_00042.ts`) is a single
/// string concatenation onto the precomputed base directory, the rest goes through RFC 3986 §5.2.2.
public struct URIResolver: Sendable {
    public let base: URIReference
    /// `scheme://authority/dir/` of the base, with dot segments removed.
    private let directoryPrefix: String

    /// The base's directory as an absolute URL (`scheme://authority/dir/`): plain relative references resolve
    /// to this plus themselves.
    public var directoryURL: String { directoryPrefix }

    /// - Throws: ``PlaylistError/invalidURI`` when `baseURL` has no scheme (relative references could not be resolved).
    public init(baseURL: String) throws {
        let base = URIReference(parsing: baseURL)
        guard base.scheme != nil else {
            throw PlaylistError.invalidURI.at(line: 0, "base URL has no scheme: \(baseURL.prefix(200))")
        }
        self.base = base
        var prefix = base
        prefix.path = URIReference.removeDotSegments(base.merge(""))
        prefix.query = nil
        prefix.fragment = nil
        directoryPrefix = prefix.string
    }

    /// The absolute form of `reference`.
    public func resolve(_ reference: String) -> String {
        if URIResolver.isPlainRelativePath(reference) { return directoryPrefix + reference }
        return base.resolving(URIReference(parsing: reference)).string
    }

    /// The absolute form of the reference stored in `bytes`, building the result with one allocation in the
    /// common case. `isBaseRelative` is true when the result simply extends the base directory (so it has the
    /// base's scheme).
    func resolve(bytes: UnsafeBufferPointer<UInt8>) -> (url: String, isBaseRelative: Bool) {
        guard URIResolver.isPlainRelativePath(bytes), URIResolver.isUTF8(bytes) else {
            return (resolve(URIResolver.text(of: bytes)), false)
        }
        let prefixCount = directoryPrefix.utf8.count
        let url = String(unsafeUninitializedCapacity: prefixCount + bytes.count) { buffer in
            var prefix = directoryPrefix
            prefix.withUTF8 { p in
                _ = UnsafeMutableBufferPointer(rebasing: buffer[0..<prefixCount]).initialize(from: p)
            }
            _ = UnsafeMutableBufferPointer(rebasing: buffer[prefixCount...]).initialize(from: bytes)
            return prefixCount + bytes.count
        }
        return (url, true)
    }

    /// The text of a reference's bytes: the bytes themselves when they are UTF-8, else the same with every byte
    /// above 0x7F written as its percent escape (`caf\u{E9}.ts` in Latin-1 → `caf%E9.ts`). Decoding would put U+FFFD
    /// (three other octets) where the playlist wrote one: the origin must get the octets the playlist has.
    public static func text(of bytes: some Collection<UInt8>) -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        let hex: [UInt8] = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 16)
        for byte in bytes {
            if byte < 0x80 {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `bytes` are ASCII, or else valid UTF-8.
    static func isUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for byte in bytes where byte >= 0x80 { return String(validating: bytes, as: UTF8.self) != nil }
        return true
    }

    /// A relative-path reference with no scheme, no authority, no leading `/`, `?` or `#`, and no `.`/`..` segment:
    /// resolving it is appending it to the base directory.
    static func isPlainRelativePath(_ reference: String) -> Bool {
        // Native Swift strings are contiguous; anything else just takes the general path.
        reference.utf8.withContiguousStorageIfAvailable { isPlainRelativePath($0) } ?? false
    }

    /// Whether every byte may appear in a URL as is (RFC 3986 pchar, `/`, `?`, `%`): such a reference needs no
    /// encoding by whoever maps it.
    /// One pass deciding the directory fast path: a relative-path reference (no scheme, no leading `/` or `?`,
    /// no `.`/`..` segment) made only of URL-safe bytes (so no `#`, no spaces).
    static func isPlainSafeReference(_ u: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let p = u.baseAddress, u.count > 0 else { return false }
        let slash = UInt8(ascii: "/"), question = UInt8(ascii: "?"), dot = UInt8(ascii: ".")
        if p[0] == slash || p[0] == question { return false }
        let n = u.count
        var segmentStart = 0
        var i = 0
        var inQuery = false
        while i < n {
            let c = p[i]
            if !isURLSafe(c) { return false }
            if !inQuery {
                if c == UInt8(ascii: ":") { return false }
                if c == slash || c == question {
                    let length = i - segmentStart
                    if (length == 1 && p[segmentStart] == dot) || (length == 2 && p[segmentStart] == dot && p[segmentStart + 1] == dot) {
                        return false
                    }
                    if c == question { inQuery = true } else { segmentStart = i + 1 }
                }
            }
            i += 1
        }
        if !inQuery {
            let length = n - segmentStart
            if (length == 1 && p[segmentStart] == dot) || (length == 2 && p[segmentStart] == dot && p[segmentStart + 1] == dot) {
                return false
            }
        }
        return true
    }

    // RFC 3986 pchar plus "/", "?" and "%" as two 64-bit masks: one shift and test per byte. (A static table
    // would pay a lazy-initialiser check per byte; a switch compiles to a chain of compares.)
    @inline(__always)
    static func isURLSafe(_ c: UInt8) -> Bool {
        let low: UInt64 = 0xafff_fff2_0000_0000  // ! $ % & ' ( ) * + , - . / 0-9 : ; = ?
        let high: UInt64 = 0x47ff_fffe_87ff_ffff  // @ A-Z _ a-z ~
        if c < 64 { return (low >> UInt64(c)) & 1 == 1 }
        if c < 128 { return (high >> UInt64(c - 64)) & 1 == 1 }
        return false
    }

    static func isPlainRelativePath(_ u: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = u.first else { return false }
        if first == UInt8(ascii: "/") || first == UInt8(ascii: "?") || first == UInt8(ascii: "#") { return false }
        var segmentStart = 0
        var i = 0
        while i < u.count {
            let c = u[i]
            if c == UInt8(ascii: ":") { return false }  // may be a scheme; let the full parser decide
            if c == UInt8(ascii: "/") || c == UInt8(ascii: "?") || c == UInt8(ascii: "#") {
                if isDotSegment(u, segmentStart, i) { return false }
                if c != UInt8(ascii: "/") { return true }
                segmentStart = i + 1
            }
            i += 1
        }
        return !isDotSegment(u, segmentStart, u.count)
    }

    private static func isDotSegment(_ u: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        let n = end - start
        if n == 1 { return u[start] == UInt8(ascii: ".") }
        if n == 2 { return u[start] == UInt8(ascii: ".") && u[start + 1] == UInt8(ascii: ".") }
        return false
    }
}
