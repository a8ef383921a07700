import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The response heads rendered for one version of a live playlist held in memory (``RewrittenPlaylist``), by the
/// form of the answer: its `Cache-Control` (a `max-age` counting down by whole seconds), its encoding and what
/// ``Responder`` adds for CORS. A version lives for a fraction of its target duration, and its players ask for it
/// again and again: each form is rendered once, then sent as bytes (``PlaylistService/preparedAnswer(for:to:)``).
/// A few forms at most are kept (the newest replaces the oldest): `max-age` moves on once a second.
final class PreparedLiveHeads: Sendable {
    struct Form: Equatable, Sendable {
        /// `Cache-Control: max-age=` this (nil: `no-cache`).
        var maxAge: Int?
        var gzip: Bool
        /// `http.allowedWebOrigins` allows any page (`*`), and the content is proxied (sandboxed): what
        /// ``Responder``'s CORS headers depend on for a request whose page it does not echo.
        var anyPage: Bool
        var proxiedContent: Bool
    }

    /// A rendered 200: the head as ``ProxyHTTPHandler/writePrepared(_:body:headOnly:)`` writes it (without its
    /// `Date` line), the headers it says (for the route observer), and the body.
    struct Answer: Sendable {
        let head: ByteBuffer
        let headers: HTTPHeaders
        let body: ByteBuffer
    }

    static let maxForms = 4
    private let forms = NIOLockedValueBox<[(form: Form, answer: Answer)]>([])

    func answer(for form: Form) -> Answer? {
        forms.withLockedValue { forms in forms.first { $0.form == form }?.answer }
    }

    func remember(_ answer: Answer, for form: Form) {
        forms.withLockedValue { forms in
            forms.removeAll { $0.form == form }
            if forms.count >= Self.maxForms { forms.removeFirst() }
            forms.append((form, answer))
        }
    }
}
