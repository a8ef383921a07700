import HLSCacheCore
import HLSOrigin
import NIOCore
import Testing

@Suite("Errors and retry timing")
struct OriginErrorTests {
    @Test func statusMapping() {
        #expect(OriginError.network.httpStatus == 502)
        #expect(OriginError.timeout.httpStatus == 504)
        #expect(OriginError.httpStatus(404).httpStatus == 404)
        #expect(OriginError.httpStatus(410).httpStatus == 410)
        #expect(OriginError.httpStatus(503).httpStatus == 503)
        #expect(OriginError.httpStatus(302).httpStatus == 502)
        #expect(OriginError.forbiddenDestination.httpStatus == 403)
        #expect(OriginError.tooManyRedirects.httpStatus == 502)
        #expect(OriginError.tooLarge.httpStatus == 502)
        #expect(OriginError.truncated.httpStatus == 502)
        #expect(OriginError.tls.httpStatus == 502)
    }

    @Test func codesAndMessages() {
        #expect(OriginError.httpStatus(404).code == "notFound")
        #expect(OriginError.httpStatus(500).code == "http")
        #expect(OriginError.timeout.code == "timeout")
        #expect(OriginError.httpStatus(500).message.contains("500"))
        let mappable: any HTTPMappableError = OriginError.forbiddenDestination
        #expect(mappable.httpStatus == 403)
        #expect(OriginError.httpStatus(404) == .httpStatus)
        #expect(OriginError.httpStatus(404).originStatus == 404)
        #expect(OriginError.timeout != .network)
    }

    @Test func backoffIsExponentialJitteredAndCapped() {
        let policy = OriginRetryPolicy(maxRetries: 5, baseDelay: .milliseconds(100), maxDelay: .milliseconds(350))
        for _ in 0..<50 {
            let first = policy.delay(beforeRetry: 1).nanoseconds
            let second = policy.delay(beforeRetry: 2).nanoseconds
            let tenth = policy.delay(beforeRetry: 10).nanoseconds
            let huge = policy.delay(beforeRetry: 100).nanoseconds
            #expect((50_000_000...100_000_000).contains(first))
            #expect((100_000_000...200_000_000).contains(second))
            #expect((175_000_000...350_000_000).contains(tenth))
            #expect((175_000_000...350_000_000).contains(huge))
        }
        #expect(OriginRetryPolicy().maxRetries == 2)
        #expect(OriginConfiguration().maxRedirects == 5)
    }
}
