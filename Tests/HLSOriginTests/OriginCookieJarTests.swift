import Foundation
import HLSCacheCore
import Testing

@testable import HLSOrigin

@Suite("Cookies origins set")
struct OriginCookieJarTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func names(_ jar: OriginCookieJar, _ url: String, at time: Date = now) throws -> [String] {
        try jar.cookies(for: OriginURL(url), now: time).map { "\($0.name)=\($0.value)" }
    }

    @Test func hostOnlyAndDomainCookies() throws {
        var jar = OriginCookieJar()
        jar.store(
            ["a=1", "b=2; Domain=.cdn.example; Path=/"], from: try OriginURL("https://edge.cdn.example/vod/master.m3u8"), now: Self.now)
        #expect(try Self.names(jar, "https://edge.cdn.example/vod/v1/index.m3u8") == ["a=1", "b=2"])
        // A host-only cookie stays with its host; a domain cookie reaches the domain's other hosts.
        #expect(try Self.names(jar, "https://other.cdn.example/vod/seg.ts") == ["b=2"])
        #expect(try Self.names(jar, "https://cdn.example/x") == ["b=2"])
        #expect(try Self.names(jar, "https://evil.example/vod/seg.ts").isEmpty)
        #expect(try Self.names(jar, "https://notcdn.example/vod/seg.ts").isEmpty)
    }

    @Test func aDomainTheHostDoesNotBelongToIsRefused() throws {
        var jar = OriginCookieJar()
        let url = try OriginURL("https://edge.cdn.example/a")
        jar.store(["x=1; Domain=other.example", "y=1; Domain=example.com", "z=1; Domain=example"], from: url, now: Self.now)
        jar.store(["t=1; Domain=com"], from: try OriginURL("https://cdn.com/a"), now: Self.now)
        #expect(jar.count == 0)
        // An IP address takes host-only cookies only.
        jar.store(["i=1; Domain=0.0.1", "j=1"], from: try OriginURL("http://127.0.0.1:8000/a"), now: Self.now)
        #expect(try Self.names(jar, "http://127.0.0.1:8000/b") == ["j=1"])
    }

    @Test func pathsMatchByDirectory() throws {
        var jar = OriginCookieJar()
        let url = try OriginURL("https://cdn.example/live/ch1/master.m3u8")
        jar.store(["dir=1", "root=1; Path=/", "deep=1; Path=/live/ch1/v1"], from: url, now: Self.now)
        #expect(try Self.names(jar, "https://cdn.example/live/ch1/v1/seg.ts") == ["deep=1", "dir=1", "root=1"])
        #expect(try Self.names(jar, "https://cdn.example/live/ch1/seg.ts") == ["dir=1", "root=1"])
        #expect(
            try Self.names(jar, "https://cdn.example/live/ch10/seg.ts") == ["root=1"], "/live/ch1 is not a prefix directory of /live/ch10")
        #expect(OriginCookieJar.defaultPath("/live/ch1/master.m3u8") == "/live/ch1")
        #expect(OriginCookieJar.defaultPath("/master.m3u8") == "/")
        #expect(OriginCookieJar.defaultPath("") == "/")
    }

    @Test func expiryReplacementAndDeletion() throws {
        var jar = OriginCookieJar()
        let url = try OriginURL("https://cdn.example/a")
        jar.store(
            [
                "short=1; Max-Age=60", "dated=1; Expires=Mon, 01 Mar 2027 00:00:00 GMT", "old=1; Expires=Thu, 01-Jan-1970 00:00:01 GMT",
                "session=1",
            ],
            from: url, now: Self.now)
        #expect(try Set(Self.names(jar, "https://cdn.example/b")) == ["short=1", "dated=1", "session=1"])
        #expect(try Set(Self.names(jar, "https://cdn.example/b", at: Self.now.addingTimeInterval(61))) == ["dated=1", "session=1"])
        #expect(try Set(Self.names(jar, "https://cdn.example/b", at: Date(timeIntervalSince1970: 1_900_000_000))) == ["session=1"])
        // Max-Age wins over Expires; a new value replaces the old; Max-Age=0 deletes.
        jar.store(["session=2", "dated=2; Max-Age=10; Expires=Mon, 01 Mar 2027 00:00:00 GMT"], from: url, now: Self.now)
        #expect(try Set(Self.names(jar, "https://cdn.example/b")) == ["short=1", "dated=2", "session=2"])
        jar.store(["session=; Max-Age=0"], from: url, now: Self.now)
        #expect(try Set(Self.names(jar, "https://cdn.example/b")) == ["short=1", "dated=2"])
    }

    @Test func secureCookiesAndMalformedOnes() throws {
        var jar = OriginCookieJar()
        jar.store(["s=1; Secure", "plain=1"], from: try OriginURL("https://cdn.example/a"), now: Self.now)
        #expect(try Self.names(jar, "http://cdn.example/a") == ["plain=1"])
        #expect(try Set(Self.names(jar, "https://cdn.example/a")) == ["s=1", "plain=1"])
        jar.store(["h=1; Secure"], from: try OriginURL("http://cdn.example/a"), now: Self.now)
        #expect(try !Self.names(jar, "https://cdn.example/a").contains("h=1"), "plain http may not set a Secure cookie")
        let before = jar.count
        jar.store(
            ["novalue", "=x", "bad name=1", String(repeating: "k", count: 5000) + "=1"], from: try OriginURL("https://cdn.example/a"),
            now: Self.now)
        #expect(jar.count == before)
    }

    @Test func aDomainKeepsAtMostFiftyCookies() throws {
        var jar = OriginCookieJar()
        let url = try OriginURL("https://cdn.example/a")
        jar.store((0..<80).map { "c\($0)=\($0)" }, from: url, now: Self.now)
        let kept = try Self.names(jar, "https://cdn.example/a")
        #expect(kept.count == OriginCookieJar.maxPerDomain)
        #expect(kept.contains("c79=79") && !kept.contains("c0=0"), "the oldest go first")
    }
}
