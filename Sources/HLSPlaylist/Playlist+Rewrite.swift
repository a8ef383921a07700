extension Playlist {
    /// Rewrites every URI of the playlist.
    ///
    /// Each rewritable URI is variable-substituted, resolved against `baseURL` (RFC 3986) and handed to `transform`
    /// with its role; the returned string replaces the value as written, and every other byte stays as it was.
    /// `transform` returning `nil` keeps the original value. URIs that are not rewritten at all: keys in a `KEYFORMAT`
    /// other than `identity` (licence servers of DRM systems) and anything that does not resolve to `http(s)`
    /// (`skd://`, `data:`). Keys of every method in the identity format are handed over (`AES-128`, `SAMPLE-AES`,
    /// `SAMPLE-AES-CTR`, `AES-256`, `AES-256-CTR`).
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
        try withoutActuallyEscaping(transform) { transform in
            try rewrite(baseURL: baseURL, imports: imports, using: ClosureRewriter(transform: transform))
        }
    }

    /// Rewrites every URI with `rewriter`; the same as ``rewrite(baseURL:imports:_:)`` but with the
    /// ``URIRewriter/directoryPrefix(for:role:)`` fast path, which makes a playlist of relative references cost
    /// a byte copy per URI.
    ///
    /// `keepingUnresolved`: a URI whose `{$name}` has no value (an `IMPORT` from a multivariant playlist the caller
    /// has not seen) stays as written instead of failing the rewrite; the playlist's `EXT-X-DEFINE` lines stay too,
    /// so a player that has the multivariant playlist substitutes it, and a relative reference still resolves
    /// against the rewritten playlist's own URL.
    public func rewrite(
        baseURL: String, imports: [String: String] = [:], keepingUnresolved: Bool = false, using rewriter: some URIRewriter
    ) throws -> [UInt8] {
        try rewrite(baseURL: baseURL, imports: imports, keepingUnresolved: keepingUnresolved, existential: rewriter)
    }

    /// The loop itself is not generic, so it is compiled once, fully optimised, whatever rewriter a caller in
    /// another module passes.
    private func rewrite(
        baseURL: String, imports: [String: String], keepingUnresolved: Bool = false, existential rewriter: any URIRewriter
    ) throws -> [UInt8] {
        let resolver = try URIResolver(baseURL: baseURL)
        let variables = try VariableTable(definitions, baseURL: resolver.base, imports: imports)
        let baseIsHTTP = resolver.base.isHTTP
        // Directory prefixes per role, asked for once (0 = not asked, 1 = none, 2 = known).
        var prefixState = [UInt8](repeating: 0, count: URIRole.allCases.count)
        var prefixes = [[UInt8]](repeating: [], count: URIRole.allCases.count)
        return try bytes.withUnsafeBufferPointer { source in
            // Pass 1: decide every replacement (a directory prefix plus the reference, or new bytes) and the
            // output size. Pass 2: copy into an exactly sized array.
            var edits: [Edit] = []
            edits.reserveCapacity(uriSlots.count)
            var replacements: [[UInt8]] = []
            var outputSize = source.count
            for slot in uriSlots where slot.rewritable {
                let reference = UnsafeBufferPointer(rebasing: source[slot.range])
                let ordinal = slot.role.ordinal
                if prefixState[ordinal] == 0 {
                    prefixState[ordinal] = 1
                    if baseIsHTTP, let text = rewriter.directoryPrefix(for: resolver.directoryURL, role: slot.role) {
                        let utf8 = Array(text.utf8)
                        if utf8.contains(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\"") }) {
                            throw PlaylistError.invalidReplacement.at(
                                line: slot.lineIndex + 1, "directory prefix contains a quote or line break")
                        }
                        prefixes[ordinal] = utf8
                        prefixState[ordinal] = 2
                    }
                }
                if prefixState[ordinal] == 2, !slot.hasVariables, URIResolver.isPlainSafeReference(reference) {
                    edits.append(Edit(range: slot.range, prefix: ordinal, replacement: -1))
                    outputSize += prefixes[ordinal].count
                    continue
                }
                let resolved: String
                let knownHTTP: Bool
                if slot.hasVariables {
                    let raw = URIResolver.text(of: reference)
                    guard let substituted = try variables.substitute(raw, line: slot.lineIndex + 1, orNil: keepingUnresolved) else {
                        continue
                    }
                    resolved = resolver.resolve(substituted)
                    knownHTTP = false
                } else {
                    (resolved, knownHTTP) = resolver.resolve(bytes: reference)
                }
                guard knownHTTP ? baseIsHTTP : Playlist.isHTTP(resolved) else { continue }
                let isKey = slot.role == .key || slot.role == .sessionKey
                guard
                    let replacement = isKey
                        ? try rewriter.rewriteKey(resolved, role: slot.role, method: keyMethod(ofLine: slot.lineIndex))
                        : try rewriter.rewrite(resolved, role: slot.role)
                else { continue }
                let utf8 = Array(replacement.utf8)
                let isAttribute = !isURILine(slot)
                for c in utf8 where c == UInt8(ascii: "\n") || c == UInt8(ascii: "\r") || (isAttribute && c == UInt8(ascii: "\"")) {
                    throw PlaylistError.invalidReplacement.at(
                        line: slot.lineIndex + 1, "replacement for a \(slot.role.rawValue) URI contains a quote or line break")
                }
                if !isAttribute && (utf8.isEmpty || utf8[0] == UInt8(ascii: "#")) {
                    throw PlaylistError.invalidReplacement.at(
                        line: slot.lineIndex + 1, "replacement for a URI line is empty or starts with '#'")
                }
                edits.append(Edit(range: slot.range, prefix: -1, replacement: replacements.count))
                outputSize += utf8.count - slot.range.count
                replacements.append(utf8)
            }
            return [UInt8](unsafeUninitializedCapacity: outputSize) { out, count in
                guard let destination = out.baseAddress, let origin = source.baseAddress else {
                    count = 0
                    return
                }
                var written = 0
                var cursor = 0
                func copy(_ from: UnsafePointer<UInt8>, _ n: Int) {
                    (destination + written).initialize(from: from, count: n)
                    written += n
                }
                for edit in edits {
                    copy(origin + cursor, edit.range.lowerBound - cursor)
                    if edit.prefix >= 0 {
                        prefixes[edit.prefix].withUnsafeBufferPointer { copy($0.baseAddress!, $0.count) }
                        copy(origin + edit.range.lowerBound, edit.range.count)
                    } else {
                        replacements[edit.replacement].withUnsafeBufferPointer { if $0.count > 0 { copy($0.baseAddress!, $0.count) } }
                    }
                    cursor = edit.range.upperBound
                }
                copy(origin + cursor, source.count - cursor)
                count = written
            }
        }
    }

    /// One planned change: the value at `range` becomes `prefixes[prefix] + value` or `replacements[replacement]`.
    private struct Edit {
        var range: Range<Int>
        var prefix: Int
        var replacement: Int
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

    /// The `METHOD` of a key tag line, as written (empty when it has none).
    private func keyMethod(ofLine index: Int) -> String {
        (try? attributes(ofLine: index))?["METHOD"] ?? ""
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

    init(values: [String: String]) {
        self.values = values
    }

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

    /// `text` with every `{$name}` replaced; `nil` when `orNil` and a name has no value.
    func substitute(_ text: String, line: Int, orNil: Bool) throws -> String? {
        do {
            return try substitute(text, line: line)
        } catch let error as PlaylistError where orNil && error == .undefinedVariable {
            return nil
        }
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
