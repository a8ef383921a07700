import HLSCacheCore
import HLSTestSupport
import Testing

@testable import HLSProxy

@Suite struct HTTPPrimitivesTests {
    @Test func playlistSniffing() {
        func sniff(_ text: [UInt8], complete: Bool = false) -> Bool? { MediaTypes.sniffPlaylist(text, complete: complete) }
        #expect(sniff(Array("#EXTM3U\n#EXT".utf8)) == true)
        #expect(sniff(Array("#EXTM3U\r\n".utf8)) == true)
        #expect(sniff([0xEF, 0xBB, 0xBF] + Array("#EXTM3U\n".utf8)) == true)
        #expect(sniff(Array("#EXTM3U".utf8)) == nil, "the next byte decides")
        #expect(sniff(Array("#EXTM3U".utf8), complete: true) == true)
        #expect(sniff(Array("#EXT".utf8)) == nil)
        #expect(sniff([0xEF, 0xBB]) == nil)
        #expect(sniff(Array("#EXT".utf8), complete: true) == false)
        #expect(sniff(Array("#EXTM3UX\n".utf8)) == false)
        #expect(sniff([0x47, 0x40, 0x11]) == false, "a TS packet is known at its first byte")
        #expect(sniff([], complete: true) == false)
        #expect(sniff([]) == nil)
        // Blank lines before the header: players (and the tolerant reader) read past them.
        #expect(sniff(Array("\n\r\n  #EXTM3U\n".utf8)) == true)
        #expect(sniff([0xEF, 0xBB, 0xBF] + Array("\n#EXTM3U\n".utf8)) == true)
        #expect(sniff(Array("\n\n".utf8)) == nil)
        #expect(sniff(Array("\n\n".utf8), complete: true) == false)
        #expect(sniff(Array("\n<html>".utf8)) == false)
        #expect(sniff(Array(repeating: 0x0A, count: 64) + Array("#EXTM3U\n".utf8)) == false)
        #expect(MediaTypes.mightBePlaylist(contentType: "application/octet-stream", pathExtension: nil))
        #expect(MediaTypes.mightBePlaylist(contentType: "Text/Plain; charset=utf-8", pathExtension: "php"))
        #expect(MediaTypes.mightBePlaylist(contentType: nil, pathExtension: nil))
        #expect(!MediaTypes.mightBePlaylist(contentType: "application/octet-stream", pathExtension: "ts"))
        #expect(!MediaTypes.mightBePlaylist(contentType: "video/mp2t", pathExtension: nil))
        #expect(!MediaTypes.mightBePlaylist(contentType: "text/vtt", pathExtension: nil))
    }

    @Test(arguments: [
        ("bytes=0-99", RangeRequest.partial(first: 0, last: 99)),
        ("bytes=100-", .partial(first: 100, last: 999)),
        ("bytes=-10", .partial(first: 990, last: 999)),
        ("bytes=-5000", .partial(first: 0, last: 999)),
        ("bytes=900-5000", .partial(first: 900, last: 999)),
        ("bytes=1000-", .unsatisfiable),
        ("bytes=-0", .unsatisfiable),
        ("bytes=5-1", .full),
        ("bytes=0-1,5-6", .full),
        ("items=0-5", .full),
        ("bytes=abc-", .full),
        ("bytes=99999999999999999999-", .full),
    ])
    func rangeHeaders(_ header: String, _ expected: RangeRequest) {
        #expect(RangeRequest(header: header, size: 1000) == expected)
    }

    @Test func noRangeOrEmptyResource() {
        #expect(RangeRequest(header: nil, size: 10) == .full)
        #expect(RangeRequest(header: "bytes=0-", size: 0) == .unsatisfiable)
    }

    @Test func httpDatesRoundTrip() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("garbage") == nil)
        let now: Int64 = 1_795_000_000
        #expect(HTTPDate.parse(HTTPDate.format(now)) == now)
    }

    /// RFC 9110 §5.6.7: recipients must accept the two obsolete forms too.
    @Test func obsoleteHTTPDateFormsAreUnderstood() {
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == 784_111_777)
        #expect(HTTPDate.parse("Wed Nov 16 08:49:37 1994") == HTTPDate.parse("Wed, 16 Nov 1994 08:49:37 GMT"))
        // A two-digit year more than 50 years ahead is the last century's.
        let in2026: Int64 = 1_780_000_000
        #expect(HTTPDate.fullYear(94, now: in2026) == 1994)
        #expect(HTTPDate.fullYear(30, now: in2026) == 2030)
        #expect(HTTPDate.fullYear(77, now: in2026) == 1977)
        #expect(HTTPDate.fullYear(76, now: in2026) == 2076)
        for malformed in [
            "Sunday, 06-Nov-1994 08:49:37 GMT", "Sunday 06-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 UTC", "Sun Nov  6 08:49:37 94",
            "Xyz Nov  6 08:49:37 1994", "Sun Nov  6 08:49 1994", "Sun 06 Nov 1994 08:49:37 GMT",
        ] {
            #expect(HTTPDate.parse(malformed) == nil, "\(malformed)")
        }
    }

    @Test func preconditions() {
        let etag = "\"abc\""
        #expect(!ConditionalRequest.preconditionFails(ifMatch: nil, ifUnmodifiedSince: nil, etag: etag, lastModified: 100))
        #expect(!ConditionalRequest.preconditionFails(ifMatch: "\"x\", \"abc\"", ifUnmodifiedSince: nil, etag: etag, lastModified: 100))
        #expect(!ConditionalRequest.preconditionFails(ifMatch: " * ", ifUnmodifiedSince: nil, etag: etag, lastModified: 100))
        #expect(ConditionalRequest.preconditionFails(ifMatch: "W/\"abc\"", ifUnmodifiedSince: nil, etag: etag, lastModified: 100))
        #expect(ConditionalRequest.preconditionFails(ifMatch: "\"abc\"", ifUnmodifiedSince: nil, etag: "W/\"abc\"", lastModified: 100))
        #expect(ConditionalRequest.preconditionFails(ifMatch: nil, ifUnmodifiedSince: HTTPDate.format(99), etag: etag, lastModified: 100))
        #expect(!ConditionalRequest.preconditionFails(ifMatch: nil, ifUnmodifiedSince: HTTPDate.format(100), etag: etag, lastModified: 100))
        #expect(
            !ConditionalRequest.preconditionFails(ifMatch: etag, ifUnmodifiedSince: HTTPDate.format(99), etag: etag, lastModified: 100),
            "If-Unmodified-Since is ignored when If-Match is there")
        for name in ["If-Match", "if-unmodified-since", "IF-RANGE", "Range"] {
            #expect(!ProxyRequest(head: .init(version: .http1_1, method: .GET, uri: "/", headers: [name: "x"])).isPlainFetch, "\(name)")
        }
        #expect(
            ProxyRequest(head: .init(version: .http1_1, method: .GET, uri: "/", headers: ["Icy-MetaData": "1", "Referer": "x"]))
                .isPlainFetch)
    }

    @Test func conditionalRequests() {
        let etag = "\"abc\""
        #expect(ConditionalRequest.isNotModified(ifNoneMatch: "\"abc\"", ifModifiedSince: nil, etag: etag, lastModified: 100))
        #expect(ConditionalRequest.isNotModified(ifNoneMatch: "\"x\", W/\"abc\"", ifModifiedSince: nil, etag: etag, lastModified: 100))
        #expect(ConditionalRequest.isNotModified(ifNoneMatch: "*", ifModifiedSince: nil, etag: etag, lastModified: 100))
        #expect(
            !ConditionalRequest.isNotModified(ifNoneMatch: "\"x\"", ifModifiedSince: HTTPDate.format(200), etag: etag, lastModified: 100),
            "If-None-Match wins over If-Modified-Since")
        #expect(ConditionalRequest.isNotModified(ifNoneMatch: nil, ifModifiedSince: HTTPDate.format(100), etag: etag, lastModified: 100))
        #expect(!ConditionalRequest.isNotModified(ifNoneMatch: nil, ifModifiedSince: HTTPDate.format(99), etag: etag, lastModified: 100))
        #expect(ConditionalRequest.ifRangeAllowsPartial(nil, etag: etag, lastModified: 1))
        #expect(ConditionalRequest.ifRangeAllowsPartial("\"abc\"", etag: etag, lastModified: 1))
        #expect(!ConditionalRequest.ifRangeAllowsPartial("W/\"abc\"", etag: etag, lastModified: 1))
        #expect(!ConditionalRequest.ifRangeAllowsPartial("\"old\"", etag: etag, lastModified: 1))
    }

    @Test func mediaTypes() {
        #expect(MediaTypes.isPlaylist(contentType: "application/x-mpegURL", pathExtension: nil))
        #expect(MediaTypes.isPlaylist(contentType: nil, pathExtension: "m3u8"))
        #expect(!MediaTypes.isPlaylist(contentType: "video/mp2t", pathExtension: "m3u8"))
        #expect(MediaTypes.choose(origin: "application/octet-stream", pathExtension: "ts") == "video/mp2t")
        #expect(MediaTypes.choose(origin: "video/iso.segment", pathExtension: "m4s") == "video/iso.segment")
        #expect(MediaTypes.choose(origin: nil, pathExtension: "vtt") == "text/vtt")
        #expect(MediaTypes.choose(origin: nil, pathExtension: nil) == "application/octet-stream")
    }

    @Test func gzipRoundTrip() {
        let text = Array(String(repeating: "#EXTINF:6.0,\nsegment.ts\n", count: 500).utf8)
        let compressed = Gzip.compress(text)
        #expect(compressed.count < text.count / 10)
        #expect(compressed.prefix(2) == [0x1f, 0x8b])
        #expect(TestZlib.decompress(compressed) == text)
        #expect(TestZlib.decompress([1, 2, 3]) == nil)
    }

    @Test func errorBodiesAreValidJSONStrings() {
        #expect(
            ErrorBody.json(code: "http", message: "a \"quoted\"\nline\u{1}")
                == "{\"error\":\"http\",\"message\":\"a \\\"quoted\\\"\\nline\\u0001\"}\n")
    }

    @Test func blockingReloadDetection() {
        #expect(ResourceService.hasBlockingReloadParameters("_HLS_msn=5&_HLS_part=1"))
        #expect(ResourceService.hasBlockingReloadParameters("a=1&_HLS_skip=YES"))
        #expect(!ResourceService.hasBlockingReloadParameters("token=_HLS_msn"))
    }
}
