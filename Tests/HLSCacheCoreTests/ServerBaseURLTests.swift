import HLSCacheCore
import Testing

/// The base of a channel list's absolute URLs: the request's Host only when it names this server (issue 41).
@Suite struct ServerBaseURLTests {
    @Test func aHostNamingTheReachedAddressIsUsed() {
        let names = ServerBaseURL()
        #expect(names.base(hostHeader: "127.0.0.1:8080", localIP: "127.0.0.1", localPort: 8080) == "http://127.0.0.1:8080")
        #expect(names.base(hostHeader: "localhost:8080", localIP: "127.0.0.1", localPort: 8080) == "http://localhost:8080")
        #expect(names.base(hostHeader: "Player.LOCALHOST:8080", localIP: "::1", localPort: 8080) == "http://player.localhost:8080")
        #expect(names.base(hostHeader: "[::1]:8080", localIP: "::1", localPort: 8080) == "http://[::1]:8080")
        // A wildcard listener: the LAN address the client reached.
        #expect(names.base(hostHeader: "192.168.1.20:8080", localIP: "192.168.1.20", localPort: 8080) == "http://192.168.1.20:8080")
        // An IPv4 client of a dual-stack socket.
        #expect(names.base(hostHeader: "127.0.0.1:8080", localIP: "::ffff:127.0.0.1", localPort: 8080) == "http://127.0.0.1:8080")
        // Port 80 may be left out.
        #expect(names.base(hostHeader: "10.0.0.2", localIP: "10.0.0.2", localPort: 80) == "http://10.0.0.2")
    }

    @Test func anyOtherHostGetsTheReachedAddress() {
        let names = ServerBaseURL()
        for host in [
            "evil.example:8080", "evil.example", "127.0.0.2:8080", "127.0.0.1:9999", "127.0.0.1", "localhost:8080 x", "",
            "tvbox.lan:8080",
        ] {
            #expect(names.base(hostHeader: host, localIP: "127.0.0.1", localPort: 8080) == "http://127.0.0.1:8080", "\(host)")
        }
        #expect(names.base(hostHeader: nil, localIP: "127.0.0.1", localPort: 8080) == "http://127.0.0.1:8080")
        // localhost on a connection that did not come over loopback is not this server's name.
        #expect(names.base(hostHeader: "localhost:8080", localIP: "192.168.1.20", localPort: 8080) == "http://192.168.1.20:8080")
        #expect(names.base(hostHeader: "[::1]:8080", localIP: "fe80::2", localPort: 8080) == "http://[fe80::2]:8080")
        #expect(names.base(hostHeader: "127.0.0.1:8080", localIP: nil, localPort: nil) == nil)
    }

    @Test func configuredNamesAreUsed() {
        let names = ServerBaseURL(serverNames: ["TVBox.lan", "localhost:18080"])
        #expect(names.base(hostHeader: "tvbox.lan:8080", localIP: "192.168.1.20", localPort: 8080) == "http://tvbox.lan:8080")
        #expect(names.base(hostHeader: "tvbox.lan", localIP: "192.168.1.20", localPort: 8080) == "http://tvbox.lan")
        // A container's port mapping: the name with the host's port.
        #expect(names.base(hostHeader: "localhost:18080", localIP: "172.17.0.2", localPort: 8080) == "http://localhost:18080")
        #expect(names.base(hostHeader: "localhost:18081", localIP: "172.17.0.2", localPort: 8080) == "http://172.17.0.2:8080")
        #expect(ServerBaseURL.isValidName("tvbox.lan:8080") && ServerBaseURL.isValidName("[::1]:80"))
        #expect(!ServerBaseURL.isValidName("http://tvbox.lan") && !ServerBaseURL.isValidName("a b"))
    }

    /// Kodi's `URL|Name=value&…` suffix on a proxied request: split off, its values decoded; a `|` that does not start
    /// such a list is part of the path.
    @Test func kodiHeaderSuffixOnARequestTarget() throws {
        let split = try #require(
            OriginURL.splittingHeaderSuffix(of: "/http/o:81/ch/one.m3u8?t=1|User-Agent=Kodi%2F20&Referer=http://p.example/x"))
        #expect(split.target == "/http/o:81/ch/one.m3u8?t=1")
        #expect(split.headers.map(\.name) == ["User-Agent", "Referer"])
        #expect(split.headers.map(\.value) == ["Kodi/20", "http://p.example/x"])
        // A value that decodes to a line break is left out, the rest is used.
        let injected = try #require(OriginURL.splittingHeaderSuffix(of: "/http/o/a.ts|Referer=x%0D%0AInjected:%201&User-Agent=A"))
        #expect(injected.target == "/http/o/a.ts")
        #expect(injected.headers.map(\.name) == ["User-Agent"])
        let escaped = try #require(OriginURL.splittingHeaderSuffix(of: "/https/o/one.m3u8%7Cuser-agent=VLC"))
        #expect(escaped.target == "/https/o/one.m3u8")
        #expect(escaped.headers.map(\.value) == ["VLC"])
        for target in ["/http/o/a|b.ts", "/http/o/a|b.ts?x=1", "/http/o/a.ts?x=|", "/http/o/a.ts|=x", "/http/o|x=1/a.ts", "/http/o/a.ts"] {
            #expect(OriginURL.splittingHeaderSuffix(of: target) == nil, "\(target)")
        }
    }
}
