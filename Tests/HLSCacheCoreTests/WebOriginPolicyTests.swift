import HLSCacheCore
import Testing

/// `http.allowedWebOrigins`: which pages behind a request the server acts for (docs/http.md "Web pages").
@Suite struct WebOriginPolicyTests {
    let policy = WebOriginPolicy.default

    @Test func requestsFromNoPagePass() {
        #expect(policy.judge(origin: nil, fetchSite: nil, referer: nil, host: "127.0.0.1:8080") == .noPage)
        #expect(policy.judge(origin: nil, fetchSite: "none", referer: nil, host: "127.0.0.1:8080") == .noPage)
    }

    @Test func loopbackPagesAreAllowedByDefault() {
        for origin in [
            "http://localhost:3000", "http://127.0.0.1:5173", "https://127.9.8.7", "http://[::1]:8000", "http://app.localhost:1234",
        ] {
            #expect(
                policy.judge(origin: origin, fetchSite: "cross-site", referer: nil, host: "127.0.0.1:8080") == .allowed(origin: origin),
                "\(origin)")
        }
    }

    @Test func otherPagesAreRefused() {
        for origin in [
            "http://evil.example", "https://evil.example:443", "null", "http://192.168.1.10:3000", "http://localhost.evil.example",
            "http://127.0.0.1.evil.example", "http://evil.example/path", "garbage", "",
        ] {
            #expect(policy.judge(origin: origin, fetchSite: nil, referer: nil, host: "127.0.0.1:8080").isRefused, "\(origin)")
        }
    }

    @Test func noCorsRequestsOfPagesAreJudgedByTheirReferer() {
        #expect(
            policy.judge(origin: nil, fetchSite: "cross-site", referer: "http://localhost:3000/player.html", host: nil)
                == .allowed(origin: nil))
        #expect(policy.judge(origin: nil, fetchSite: "cross-site", referer: "http://evil.test:8000/", host: nil).isRefused)
        // A page that hides its Referer is not known, so not allowed.
        #expect(policy.judge(origin: nil, fetchSite: "cross-site", referer: nil, host: nil).isRefused)
        #expect(policy.judge(origin: nil, fetchSite: "same-site", referer: nil, host: nil).isRefused)
        #expect(policy.judge(origin: nil, fetchSite: "same-origin", referer: nil, host: nil) == .allowed(origin: nil))
    }

    @Test func theServersOwnOriginIsAllowedOnlyWhenAddressedByLiteral() {
        let lan = WebOriginPolicy(entries: [])
        #expect(
            lan.judge(origin: "http://192.168.1.5:8080", fetchSite: "same-origin", referer: nil, host: "192.168.1.5:8080")
                == .allowed(origin: "http://192.168.1.5:8080"))
        // A name could be a DNS rebinding of a hostile site onto this machine.
        #expect(lan.judge(origin: "http://evil.example:8080", fetchSite: "same-origin", referer: nil, host: "evil.example:8080").isRefused)
        #expect(lan.judge(origin: "http://192.168.1.5:8081", fetchSite: nil, referer: nil, host: "192.168.1.5:8080").isRefused)
    }

    /// The admin API's DNS-rebinding rule without a token: only hosts a rebinding cannot take over.
    @Test func hostHeadersThatNameTheServerByLiteralOrLocalhost() {
        for host in ["127.0.0.1:8080", "192.168.1.5", "[::1]:8080", "localhost", "LOCALHOST:80", "app.localhost:3000"] {
            #expect(WebOriginPolicy.isLiteralOrLocalhost(hostHeader: host), "\(host)")
        }
        for host in ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example", "", "a b"] {
            #expect(!WebOriginPolicy.isLiteralOrLocalhost(hostHeader: host), "\(host)")
        }
    }

    @Test func listsParseAndMatchExactly() throws {
        let listed = try WebOriginPolicy(parsing: ["https://Player.Example:443", "http://tv.example:8000", "null"])
        #expect(listed.description == "https://player.example, http://tv.example:8000, null")
        #expect(
            listed.judge(origin: "https://player.example", fetchSite: nil, referer: nil, host: nil)
                == .allowed(origin: "https://player.example"))
        #expect(
            listed.judge(origin: "http://tv.example:8000", fetchSite: nil, referer: nil, host: nil)
                == .allowed(origin: "http://tv.example:8000"))
        #expect(listed.judge(origin: "null", fetchSite: nil, referer: nil, host: nil) == .allowed(origin: "null"))
        #expect(listed.judge(origin: "http://player.example", fetchSite: nil, referer: nil, host: nil).isRefused, "another scheme")
        #expect(listed.judge(origin: "http://localhost:3000", fetchSite: nil, referer: nil, host: nil).isRefused, "loopback not listed")
        #expect(try WebOriginPolicy(parsing: ["*"]).allowsAnyPage)
        #expect(
            try WebOriginPolicy(parsing: ["*"]).judge(origin: "http://evil.example", fetchSite: nil, referer: nil, host: nil)
                == .allowed(origin: "http://evil.example"))
        for bad in ["player.example", "https://player.example/app", "https://user@player.example", "https://player.example:99999"] {
            #expect(throws: WebOriginPolicyError.self, "\(bad)") { try WebOriginPolicy(parsing: [bad]) }
        }
    }
}
