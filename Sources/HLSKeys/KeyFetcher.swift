import HLSCacheCore
import HLSOrigin

/// What the key service fetches keys with: the ``OriginClient`` in the server (with its per-origin headers,
/// cookies and destination policy), a stand-in in unit tests.
package protocol KeyFetcher: Sendable {
    /// Fetches a small body; non-2xx statuses are thrown as `OriginError.httpStatus`.
    func fetch(_ url: OriginURL, headers: [(String, String)], maxBytes: Int) async throws(OriginError) -> OriginResponse
}

extension OriginClient: KeyFetcher {}
