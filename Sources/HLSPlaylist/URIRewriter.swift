/// What replaces each URI of a playlist during ``Playlist/rewrite(baseURL:imports:keepingUnresolved:using:)``.
///
/// ``rewrite(_:role:)`` is the whole contract. ``directoryPrefix(for:role:)`` is an optional fast path for the
/// common case of a playlist full of plain relative references (`seg_00042.ts`): if it returns `P` for a role,
/// the rewriter promises that for every reference `r` made only of URL characters, with no scheme, no leading `/`
/// and no dot segments, `rewrite(directoryURL + r, role)` would return `P + r`; the engine then appends `P` and
/// the reference's bytes directly and skips the call. Returning nil (the default) keeps the general path.
public protocol URIRewriter {
    /// The replacement for a resolved absolute URL, or nil to keep the value as written.
    func rewrite(_ resolvedURL: String, role: URIRole) throws -> String?

    /// The replacement of the base directory (`scheme://authority/dir/`) for references resolving inside it.
    func directoryPrefix(for directoryURL: String, role: URIRole) -> String?

    /// The replacement for a key's URL (`EXT-X-KEY`, `EXT-X-SESSION-KEY`, role ``URIRole/key`` or
    /// ``URIRole/sessionKey``), told the key's `METHOD` as written (`AES-128`, `SAMPLE-AES`, `AES-256`, …), which
    /// says the key's length. By default ``rewrite(_:role:)``.
    func rewriteKey(_ resolvedURL: String, role: URIRole, method: String) throws -> String?
}

extension URIRewriter {
    public func directoryPrefix(for directoryURL: String, role: URIRole) -> String? { nil }
    public func rewriteKey(_ resolvedURL: String, role: URIRole, method: String) throws -> String? {
        try rewrite(resolvedURL, role: role)
    }
}

/// Adapts a closure to ``URIRewriter`` (no fast path).
struct ClosureRewriter: URIRewriter {
    let transform: (String, URIRole) throws -> String?
    func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? { try transform(resolvedURL, role) }
}
