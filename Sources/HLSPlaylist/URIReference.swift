/// A URI reference split into its RFC 3986 components, with percent-encoding left exactly as written.
///
/// This is deliberately not Foundation's `URL`: resolution must keep every byte of the reference
/// (no re-encoding, no normalisation beyond dot-segment removal) and must be fast enough to run for
/// every segment of a 5,000-segment playlist on every request.
public struct URIReference: Sendable, Hashable {
    public var scheme: String?
    /// The authority without the leading `//` (`host`, `host:port`, `user@host`), if present.
    public var authority: String?
    public var path: String
    public var query: String?
    public var fragment: String?

    public init(scheme: String? = nil, authority: String? = nil, path: String, query: String? = nil, fragment: String? = nil) {
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.query = query
        self.fragment = fragment
    }

    /// Splits `string` per RFC 3986 appendix B. Every string is a valid reference in this loose sense;
    /// callers check the parts they need.
    public init(parsing string: String) {
        let u = Array(string.utf8)
        var i = 0
        // scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"
        var scheme: String?
        if let first = u.first, URIReference.isAlpha(first) {
            var j = 1
            while j < u.count, URIReference.isSchemeChar(u[j]) { j += 1 }
            if j < u.count, u[j] == UInt8(ascii: ":") {
                scheme = String(decoding: u[0..<j], as: UTF8.self)
                i = j + 1
            }
        }
        var authority: String?
        if i + 1 < u.count, u[i] == UInt8(ascii: "/"), u[i + 1] == UInt8(ascii: "/") {
            var j = i + 2
            while j < u.count, u[j] != UInt8(ascii: "/"), u[j] != UInt8(ascii: "?"), u[j] != UInt8(ascii: "#") { j += 1 }
            authority = String(decoding: u[(i + 2)..<j], as: UTF8.self)
            i = j
        }
        var j = i
        while j < u.count, u[j] != UInt8(ascii: "?"), u[j] != UInt8(ascii: "#") { j += 1 }
        let path = String(decoding: u[i..<j], as: UTF8.self)
        i = j
        var query: String?
        if i < u.count, u[i] == UInt8(ascii: "?") {
            j = i + 1
            while j < u.count, u[j] != UInt8(ascii: "#") { j += 1 }
            query = String(decoding: u[(i + 1)..<j], as: UTF8.self)
            i = j
        }
        var fragment: String?
        if i < u.count, u[i] == UInt8(ascii: "#") {
            fragment = String(decoding: u[(i + 1)...], as: UTF8.self)
        }
        self.init(scheme: scheme, authority: authority, path: path, query: query, fragment: fragment)
    }

    /// Recomposes the reference (RFC 3986 §5.3).
    public var string: String {
        var out = ""
        if let scheme { out += scheme; out += ":" }
        if let authority { out += "//"; out += authority }
        out += path
        if let query { out += "?"; out += query }
        if let fragment { out += "#"; out += fragment }
        return out
    }

    /// Whether the scheme is `http` or `https` (case-insensitive).
    public var isHTTP: Bool {
        guard let scheme else { return false }
        let lower = scheme.lowercased()
        return lower == "http" || lower == "https"
    }

    /// Resolves `reference` against `self` as base (RFC 3986 §5.2.2, strict).
    public func resolving(_ reference: URIReference) -> URIReference {
        var target = URIReference(path: "")
        if let scheme = reference.scheme {
            target.scheme = scheme
            target.authority = reference.authority
            target.path = URIReference.removeDotSegments(reference.path)
            target.query = reference.query
        } else {
            if let authority = reference.authority {
                target.authority = authority
                target.path = URIReference.removeDotSegments(reference.path)
                target.query = reference.query
            } else {
                if reference.path.isEmpty {
                    target.path = path
                    target.query = reference.query ?? query
                } else {
                    if reference.path.utf8.first == UInt8(ascii: "/") {
                        target.path = URIReference.removeDotSegments(reference.path)
                    } else {
                        target.path = URIReference.removeDotSegments(merge(reference.path))
                    }
                    target.query = reference.query
                }
                target.authority = authority
            }
            target.scheme = scheme
        }
        target.fragment = reference.fragment
        return target
    }

    /// RFC 3986 §5.2.3.
    func merge(_ referencePath: String) -> String {
        if authority != nil && path.isEmpty { return "/" + referencePath }
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return referencePath }
        return String(path[...slash]) + referencePath
    }

    /// RFC 3986 §5.2.4, applied to bytes so percent-encoded octets are never touched.
    public static func removeDotSegments(_ path: String) -> String {
        let dot = UInt8(ascii: "."), slash = UInt8(ascii: "/")
        var input = Array(path.utf8)
        if !input.contains(dot) { return path }
        var output: [UInt8] = []
        output.reserveCapacity(input.count)
        var i = 0
        func remaining(_ k: Int) -> Int { input.count - i - k }
        func popLastSegment() {
            if let last = output.lastIndex(of: slash) { output.removeSubrange(last...) } else { output.removeAll() }
        }
        while i < input.count {
            let c0 = input[i]
            let c1: UInt8? = i + 1 < input.count ? input[i + 1] : nil
            let c2: UInt8? = i + 2 < input.count ? input[i + 2] : nil
            let c3: UInt8? = i + 3 < input.count ? input[i + 3] : nil
            if c0 == dot, c1 == dot, c2 == slash {  // A: "../"
                i += 3
            } else if c0 == dot, c1 == slash {  // A: "./"
                i += 2
            } else if c0 == slash, c1 == dot, c2 == slash {  // B: "/./"
                i += 2
            } else if c0 == slash, c1 == dot, c2 == nil {  // B: "/."
                input[i + 1] = slash
                i += 1
            } else if c0 == slash, c1 == dot, c2 == dot, c3 == slash {  // C: "/../"
                i += 3
                popLastSegment()
            } else if c0 == slash, c1 == dot, c2 == dot, c3 == nil {  // C: "/.."
                input[i + 2] = slash
                i += 2
                popLastSegment()
            } else if c0 == dot, c1 == nil || (c1 == dot && c2 == nil) {  // D: "." or ".."
                i = input.count
            } else {  // E: move the first segment
                var j = i
                if input[j] == slash { j += 1 }
                while j < input.count, input[j] != slash { j += 1 }
                output.append(contentsOf: input[i..<j])
                i = j
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// ASCII letter test used by URL validators.
    public static func isAlpha(_ c: UInt8) -> Bool { (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z") }
    static func isSchemeChar(_ c: UInt8) -> Bool {
        isAlpha(c) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "+") || c == UInt8(ascii: "-")
            || c == UInt8(ascii: ".")
    }
}
