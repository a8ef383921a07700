import HLSCacheCore
import Testing

@testable import HLSProxy

/// ``ProxyError`` compares by kind, as ``HLSOrigin/OriginError`` does: the message and an origin's status are what
/// the client is told, not what the error is.
@Suite struct ProxyErrorTests {
    @Test func valuesAreEqualByKindWhateverTheirMessage() {
        #expect(ProxyError.badRequest("malformed") == .badRequest)
        #expect(ProxyError.badRequest("a") == ProxyError.badRequest("b"))
        #expect(ProxyError.badRequest("a") != .forbidden)
        #expect(ProxyError.pageNotAllowed("https://evil.example") != .forbidden, "both 403, two kinds")
        #expect(ProxyError.originStatus(404, host: "cdn.example.com") == .originStatus)
        #expect(ProxyError.originStatus(404, host: "a") == ProxyError.originStatus(503, host: "b"))
        #expect(Set([ProxyError.unavailable("a"), .unavailable("b"), .unavailable]).count == 1)
    }

    @Test func eachKindMapsToItsStatusAndCode() {
        let expected: [(ProxyError, Int, String)] = [
            (.badRequest("x"), 400, "badRequest"), (.notFound("x"), 404, "notFound"), (.methodNotAllowed("PUT"), 405, "methodNotAllowed"),
            (.headersTooLarge("x"), 431, "headersTooLarge"), (.corrupted("x"), 502, "corrupted"), (.forbidden("x"), 403, "forbidden"),
            (.unavailable("x"), 503, "unavailable"), (.rangeNotSatisfiable(size: 10), 416, "rangeNotSatisfiable"),
            (.payloadTooLarge("x"), 413, "payloadTooLarge"), (.preconditionFailed("x"), 412, "preconditionFailed"),
            (.notImplemented("BREW"), 501, "notImplemented"), (.pageNotAllowed("https://evil.example"), 403, "pageNotAllowed"),
            (.loopDetected("x"), 508, "loopDetected"),
        ]
        for (error, status, code) in expected {
            #expect(error.httpStatus == status, "\(error)")
            #expect(error.code == code, "\(error)")
        }
        #expect(ProxyError.badRequest.httpStatus == 400 && ProxyError.badRequest.code == "badRequest")
    }

    @Test func anOriginStatusIsPassedThroughWithItsRetryAfter() {
        let notFound = ProxyError.originStatus(404, host: "cdn.example.com")
        #expect(notFound.httpStatus == 404 && notFound.code == "notFound")
        #expect(notFound.message == "origin cdn.example.com answered 404")
        let busy = ProxyError.originStatus(503, host: "cdn.example.com", retryAfter: .seconds(30))
        #expect(busy.httpStatus == 503 && busy.code == "http" && busy.retryAfterSeconds == 30)
    }
}
