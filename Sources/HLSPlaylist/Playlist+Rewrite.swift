extension Playlist {
    /// Rewrites every URI of the playlist.
    ///
    /// Each rewritable URI is variable-substituted, resolved against `baseURL` (RFC 3986) and handed to `transform`
    /// with its role; the returned string replaces the value as written, and every other byte stays as it was.
    /// `transform` returning `nil` keeps the original value. URIs that are not rewritten at all: keys whose METHOD is
    /// not `AES-128` (`SAMPLE-AES`, `SAMPLE-AES-CTR`, vendor DRM) and anything that does not resolve to `http(s)`
    /// (`skd://`, `data:`).
    ///
    /// - Parameters:
    ///   - baseURL: the playlist's own absolute URL (after redirects), the base for relative references and the
    ///     source of `QUERYPARAM` variables.
    ///   - imports: variables of the multivariant playlist, for `EXT-X-DEFINE:IMPORT=`.
    /// - Throws: ``PlaylistError`` for an undefined variable, an unusable base URL, or a replacement that cannot
    ///   stand where the URI was (a `"` inside an attribute, a line break anywhere).
    public func rewrite(
        baseURL: String, imports: [String: String] = [:],
        _ transform: (_ resolvedURL: String, _ role: URIRole) throws -> String?
    ) throws -> [UInt8] {
        let resolver = try URIResolver(baseURL: baseURL)
        let variables = try VariableTable(definitions, baseURL: resolver.base, imports: imports)
        let baseIsHTTP = resolver.base.isHTTP
        return try bytes.withUnsafeBufferPointer { source in
            var out: [UInt8] = []
            out.reserveCapacity(source.count + source.count / 2)
            var cursor = 0
            for slot in uriSlots where slot.rewritable {
                let resolved: String
                let knownHTTP: Bool
                if slot.hasVariables {
                    let raw = String(decoding: UnsafeBufferPointer(rebasing: source[slot.range]), as: UTF8.self)
                    resolved = resolver.resolve(try variables.substitute(raw, line: slot.lineIndex + 1))
                    knownHTTP = false
                } else {
                    (resolved, knownHTTP) = resolver.resolve(bytes: UnsafeBufferPointer(rebasing: source[slot.range]))
                }
                guard knownHTTP ? baseIsHTTP : Playlist.isHTTP(resolved), var replacement = try transform(resolved, slot.role) else {
                    continue
                }
                let isAttribute = !isURILine(slot)
                try replacement.withUTF8 { utf8 in
                    for c in utf8 where c == UInt8(ascii: "\n") || c == UInt8(ascii: "\r") || (isAttribute && c == UInt8(ascii: "\"")) {
                        throw PlaylistError.invalidReplacement.at(
                            line: slot.lineIndex + 1, "replacement for a \(slot.role.rawValue) URI contains a quote or line break")
                    }
                    if !isAttribute && (utf8.isEmpty || utf8[0] == UInt8(ascii: "#")) {
                        throw PlaylistError.invalidReplacement.at(
                            line: slot.lineIndex + 1, "replacement for a URI line is empty or starts with '#'")
                    }
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: source[cursor..<slot.range.lowerBound]))
                    out.append(contentsOf: utf8)
                }
                cursor = slot.range.upperBound
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: source[cursor...]))
            return out
        }
    }

    /// Every rewritable URI resolved against `baseURL`, with its role, in document order (what ``rewrite(baseURL:imports:_:)``
    /// would hand to its closure).
    public func resolvedURIs(baseURL: String, imports: [String: String] = [:]) throws -> [(url: String, role: URIRole)] {
        var result: [(String, URIRole)] = []
        _ = try rewrite(baseURL: baseURL, imports: imports) { url, role in
            result.append((url, role))
            return nil
        }
        return result
    }

    private func isURILine(_ slot: URISlot) -> Bool {
        if case .uri = lines[slot.lineIndex].kind { return true }
        return false
    }

    static func isHTTP(_ url: String) -> Bool {
        var url = url
        return url.withUTF8 { u in
            func lower(_ k: Int) -> UInt8 { u[k] | 0x20 }
            guard u.count >= 7, lower(0) == UInt8(ascii: "h"), lower(1) == UInt8(ascii: "t"), lower(2) == UInt8(ascii: "t"),
                lower(3) == UInt8(ascii: "p")
            else { return false }
            if u[4] == UInt8(ascii: ":") { return true }
            return lower(4) == UInt8(ascii: "s") && u[5] == UInt8(ascii: ":")
        }
    }
}

/// Variable values for `{$name}` substitution (RFC 8216bis §4.3).
struct VariableTable {
    private var values: [String: String] = [:]

    init(_ definitions: [VariableDefinition], baseURL: URIReference, imports: [String: String]) throws {
        for definition in definitions {
            switch definition.source {
            case .value(let value): values[definition.name] = value
            case .import:
                // A missing import only matters if the variable is used; substitute() reports it then.
                if let value = imports[definition.name] { values[definition.name] = value }
            case .queryParameter:
                if let value = VariableTable.queryParameter(definition.name, in: baseURL.query) {
                    values[definition.name] = value
                }
            }
        }
    }

    var all: [String: String] { values }

    static func queryParameter(_ name: String, in query: String?) -> String? {
        guard let query else { return nil }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts[0] == name { return parts.count == 2 ? String(parts[1]) : "" }
        }
        return nil
    }

    func substitute(_ text: String, line: Int) throws -> String {
        let u = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(u.count + 32)
        var i = 0
        while i < u.count {
            if u[i] == UInt8(ascii: "{"), i + 1 < u.count, u[i + 1] == UInt8(ascii: "$"),
                let close = u[(i + 2)...].firstIndex(of: UInt8(ascii: "}"))
            {
                let name = String(decoding: u[(i + 2)..<close], as: UTF8.self)
                guard let value = values[name] else {
                    throw PlaylistError.undefinedVariable.at(line: line, "no value for {$\(name)} (import or query parameter missing)")
                }
                out.append(contentsOf: value.utf8)
                i = close + 1
            } else {
                out.append(u[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
