import HLSCacheCore
import HLSOrigin
import NIOHTTP1
import Testing

@testable import HLSProxy

/// The origin-head decisions the whole-object download and the `Range` relay share, without a channel.
@Suite struct OriginHeadClassifierTests {
    static func head(_ status: Int = 200, type: String?, path: String, headers extra: [(String, String)] = []) throws
        -> (OriginResponseHead, OriginURL)
    {
        var headers = HTTPHeaders()
        if let type { headers.add(name: "Content-Type", value: type) }
        for (name, value) in extra { headers.add(name: name, value: value) }
        let url = try OriginURL("http://origin.test\(path)")
        return (OriginResponseHead(status: status, headers: headers, url: url), url)
    }

    static func whole(_ status: Int = 200, type: String?, path: String, headers: [(String, String)] = []) throws
        -> Result<OriginHeadClassifier.Verdict, ProxyError>
    {
        let (head, url) = try head(status, type: type, path: path, headers: headers)
        return OriginHeadClassifier.whole(head, url: url)
    }

    static func range(_ status: Int = 206, type: String?, path: String, from first: Int = 0) throws -> OriginHeadClassifier.Verdict {
        let (head, url) = try head(status, type: type, path: path, headers: [("Content-Range", "bytes \(first)-99/1000")])
        return OriginHeadClassifier.range(head, url: url)
    }

    @Test func aWholeAnswerIsAPlaylistMediaOrSniffed() throws {
        #expect(try Self.whole(type: "video/mp2t", path: "/v/seg1.ts").get() == .media)
        #expect(try Self.whole(type: "application/vnd.apple.mpegurl", path: "/v/index.m3u8").get() == .playlist)
        #expect(try Self.whole(type: "application/octet-stream", path: "/v/index.m3u8").get() == .playlist, "the path says so")
        #expect(try Self.whole(type: "video/mp2t", path: "/v/index.m3u8").get() == .media, "a media type wins over the path")
        #expect(try Self.whole(type: "application/octet-stream", path: "/live/manifest").get() == .sniff, "generic type, no extension")
        #expect(try Self.whole(type: nil, path: "/play?id=5").get() == .sniff)
        #expect(try Self.whole(type: "text/plain; charset=utf-8", path: "/live/manifest").get() == .sniff)
        #expect(try Self.whole(type: "application/x-mpegURL", path: "/v/seg1.ts").get() == .sniff, "a media path labelled a playlist")
        #expect(try Self.whole(type: "application/octet-stream", path: "/v/seg1.ts").get() == .media)
        #expect(try Self.whole(type: "application/json", path: "/v/data").get() == .media)
    }

    @Test func aWholeAnswerOtherThan200IsAnError() throws {
        for status in [206, 304] {
            guard case .failure(let error) = try Self.whole(status, type: "video/mp2t", path: "/v/seg1.ts") else {
                Issue.record("\(status) accepted")
                continue
            }
            #expect(error == .corrupted && error.httpStatus == 502, "\(status) to a plain GET")
        }
        guard case .failure(let notFound) = try Self.whole(404, type: "text/html", path: "/v/seg1.ts") else {
            Issue.record("404 accepted")
            return
        }
        #expect(notFound == .originStatus && notFound.httpStatus == 404)
        guard case .failure(let busy) = try Self.whole(503, type: nil, path: "/v/seg1.ts", headers: [("Retry-After", "7")]) else {
            Issue.record("503 accepted")
            return
        }
        #expect(busy == .originStatus && busy.httpStatus == 503 && busy.retryAfterSeconds == 7)
    }

    @Test func aRangeAnswerIsSniffedOnlyFromItsFirstByte() throws {
        #expect(try Self.range(type: "application/vnd.apple.mpegurl", path: "/v/index.m3u8") == .playlist)
        #expect(try Self.range(type: "application/vnd.apple.mpegurl", path: "/v/index.m3u8", from: 100) == .playlist)
        #expect(try Self.range(type: "application/octet-stream", path: "/live/manifest") == .sniff)
        #expect(try Self.range(200, type: nil, path: "/live/manifest") == .sniff)
        #expect(try Self.range(type: "application/octet-stream", path: "/live/manifest", from: 100) == .media, "a middle part cannot tell")
        #expect(try Self.range(type: "application/x-mpegURL", path: "/v/seg1.ts") == .media, "relayed as media, not sniffed")
        #expect(try Self.range(type: "video/mp4", path: "/v/movie.mp4") == .media)
        // The playlist path takes a playlist whatever the status; the relay judges other statuses when it answers.
        #expect(try Self.range(404, type: "application/vnd.apple.mpegurl", path: "/v/index.m3u8") == .playlist)
    }

    @Test func aRangeAnswerPassesOn200206And416() throws {
        for status in [200, 206, 416] {
            let (head, url) = try Self.head(status, type: "video/mp4", path: "/v/movie.mp4")
            #expect(OriginHeadClassifier.rangeFailure(head, url: url) == nil, "\(status)")
        }
        for status in [304, 403, 404, 500] {
            let (head, url) = try Self.head(status, type: "video/mp4", path: "/v/movie.mp4")
            let error = OriginHeadClassifier.rangeFailure(head, url: url)
            #expect(error == .originStatus && error?.httpStatus == status, "\(status)")
        }
    }

    @Test func mediaItsOriginCallsAPlaylistGetsItsExtensionsType() {
        #expect(OriginHeadClassifier.mediaType(origin: "application/x-mpegURL", pathExtension: "ts") == "video/mp2t")
        #expect(OriginHeadClassifier.mediaType(origin: "audio/mpegurl", pathExtension: "aac") == "audio/aac")
        #expect(OriginHeadClassifier.mediaType(origin: "video/mp2t", pathExtension: "mp4") == "video/mp2t", "the origin's own media type")
        #expect(OriginHeadClassifier.mediaType(origin: "application/octet-stream", pathExtension: "m4s") == "video/mp4")
        #expect(OriginHeadClassifier.mediaType(origin: nil, pathExtension: nil) == "application/octet-stream")
        #expect(OriginHeadClassifier.mediaType(origin: "application/x-mpegURL", pathExtension: nil) == "application/octet-stream")
    }
}
