/// Substitutes variables and resolves references for the typed views.
struct ResolutionContext {
    let resolver: URIResolver?
    let variables: VariableTable

    init(playlist: Playlist, baseURL: String?, imports: [String: String]) throws {
        resolver = try baseURL.map { try URIResolver(baseURL: $0) }
        variables = try VariableTable(
            playlist.definitions, baseURL: resolver?.base ?? URIReference(path: ""), imports: imports)
    }

    /// `raw` with its variables substituted (a quoted-string, enumerated-string or hexadecimal-sequence value).
    func substitute(_ raw: String, line: Int) throws -> String {
        raw.utf8.contains(UInt8(ascii: "{")) ? try variables.substitute(raw, line: line) : raw
    }

    /// The reference as written, with variables substituted, and its absolute form (the same when no base was given).
    func reference(_ raw: String, line: Int) throws -> (uri: String, url: String) {
        let uri = raw.utf8.contains(UInt8(ascii: "{")) ? try variables.substitute(raw, line: line) : raw
        return (uri, resolver?.resolve(uri) ?? uri)
    }
}
