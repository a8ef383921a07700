import HLSPlaylist
import HLSTestSupport
import Testing

/// RFC 3986 §5.4 reference resolution, plus the cases playlists meet in practice.
@Suite struct URIResolverTests {
    struct Example: Sendable, CustomTestStringConvertible {
        var reference: String
        var target: String
        var testDescription: String { "\"\(reference)\" → \(target)" }
    }

    static let base = "http://a/b/c/d;p?q"

    /// §5.4.1.
    static let normal: [Example] = [
        .init(reference: "g:h", target: "g:h"),
        .init(reference: "g", target: "http://a/b/c/g"),
        .init(reference: "./g", target: "http://a/b/c/g"),
        .init(reference: "g/", target: "http://a/b/c/g/"),
        .init(reference: "/g", target: "http://a/g"),
        .init(reference: "//g", target: "http://g"),
        .init(reference: "?y", target: "http://a/b/c/d;p?y"),
        .init(reference: "g?y", target: "http://a/b/c/g?y"),
        .init(reference: "#s", target: "http://a/b/c/d;p?q#s"),
        .init(reference: "g#s", target: "http://a/b/c/g#s"),
        .init(reference: "g?y#s", target: "http://a/b/c/g?y#s"),
        .init(reference: ";x", target: "http://a/b/c/;x"),
        .init(reference: "g;x", target: "http://a/b/c/g;x"),
        .init(reference: "g;x?y#s", target: "http://a/b/c/g;x?y#s"),
        .init(reference: "", target: "http://a/b/c/d;p?q"),
        .init(reference: ".", target: "http://a/b/c/"),
        .init(reference: "./", target: "http://a/b/c/"),
        .init(reference: "..", target: "http://a/b/"),
        .init(reference: "../", target: "http://a/b/"),
        .init(reference: "../g", target: "http://a/b/g"),
        .init(reference: "../..", target: "http://a/"),
        .init(reference: "../../", target: "http://a/"),
        .init(reference: "../../g", target: "http://a/g"),
    ]

    /// §5.4.2 (strict parser: `http:g` keeps its scheme).
    static let abnormal: [Example] = [
        .init(reference: "../../../g", target: "http://a/g"),
        .init(reference: "../../../../g", target: "http://a/g"),
        .init(reference: "/./g", target: "http://a/g"),
        .init(reference: "/../g", target: "http://a/g"),
        .init(reference: "g.", target: "http://a/b/c/g."),
        .init(reference: ".g", target: "http://a/b/c/.g"),
        .init(reference: "g..", target: "http://a/b/c/g.."),
        .init(reference: "..g", target: "http://a/b/c/..g"),
        .init(reference: "./../g", target: "http://a/b/g"),
        .init(reference: "./g/.", target: "http://a/b/c/g/"),
        .init(reference: "g/./h", target: "http://a/b/c/g/h"),
        .init(reference: "g/../h", target: "http://a/b/c/h"),
        .init(reference: "g;x=1/./y", target: "http://a/b/c/g;x=1/y"),
        .init(reference: "g;x=1/../y", target: "http://a/b/c/y"),
        .init(reference: "g?y/./x", target: "http://a/b/c/g?y/./x"),
        .init(reference: "g?y/../x", target: "http://a/b/c/g?y/../x"),
        .init(reference: "g#s/./x", target: "http://a/b/c/g#s/./x"),
        .init(reference: "g#s/../x", target: "http://a/b/c/g#s/../x"),
        .init(reference: "http:g", target: "http:g"),
    ]

    @Test(arguments: normal)
    func normalExamples(example: Example) throws {
        #expect(try URIResolver(baseURL: Self.base).resolve(example.reference) == example.target)
    }

    @Test(arguments: abnormal)
    func abnormalExamples(example: Example) throws {
        #expect(try URIResolver(baseURL: Self.base).resolve(example.reference) == example.target)
    }

    /// The general algorithm (`URIReference.resolving`) must agree with the resolver's fast path.
    @Test(arguments: normal + abnormal)
    func referenceResolvingAgrees(example: Example) {
        let resolved = URIReference(parsing: Self.base).resolving(URIReference(parsing: example.reference))
        #expect(resolved.string == example.target)
    }

    @Test(arguments: [
        // Network-path and query-only references keep the base's scheme / path.
        Example(reference: "//host/x", target: "https://host/x"),
        Example(reference: "//host:8443/x?y=1", target: "https://host:8443/x?y=1"),
        Example(reference: "?x=1", target: "https://cdn.example.com/vod/a/index.m3u8?x=1"),
        Example(reference: "", target: "https://cdn.example.com/vod/a/index.m3u8?token=t"),
        // Percent-encoding is kept exactly as written, never decoded or re-encoded.
        Example(reference: "seg%2F1.ts", target: "https://cdn.example.com/vod/a/seg%2F1.ts"),
        Example(reference: "my%20seg.ts?a=%20&b=%2f", target: "https://cdn.example.com/vod/a/my%20seg.ts?a=%20&b=%2f"),
        Example(reference: "%2E%2E/x.ts", target: "https://cdn.example.com/vod/a/%2E%2E/x.ts"),
        // Fragments come from the reference, never from the base.
        Example(reference: "seg.ts#t=10", target: "https://cdn.example.com/vod/a/seg.ts#t=10"),
        Example(reference: "#frag", target: "https://cdn.example.com/vod/a/index.m3u8?token=t#frag"),
        Example(reference: "sub/../seg.ts", target: "https://cdn.example.com/vod/a/seg.ts"),
        Example(reference: "/abs/seg.ts", target: "https://cdn.example.com/abs/seg.ts"),
        Example(reference: "http://other.example.com/./a/../b.ts", target: "http://other.example.com/b.ts"),
        Example(reference: "skd://key-id", target: "skd://key-id"),
    ])
    func playlistCases(example: Example) throws {
        let resolver = try URIResolver(baseURL: "https://cdn.example.com/vod/a/index.m3u8?token=t#top")
        #expect(resolver.resolve(example.reference) == example.target)
    }

    @Test func baseWithoutPathOrWithDotSegments() throws {
        #expect(try URIResolver(baseURL: "http://h").resolve("seg.ts") == "http://h/seg.ts")
        #expect(try URIResolver(baseURL: "http://h?q").resolve("seg.ts") == "http://h/seg.ts")
        #expect(try URIResolver(baseURL: "http://h/a/../b/list.m3u8").resolve("seg.ts") == "http://h/b/seg.ts")
        #expect(try URIResolver(baseURL: "http://h/a/../b/list.m3u8").resolve("./seg.ts") == "http://h/b/seg.ts")
    }

    @Test func parsingSplitsComponents() {
        let reference = URIReference(parsing: "https://user@h:8080/p/a%2Fb;x?q=1&r=%20#f/g")
        #expect(reference.scheme == "https")
        #expect(reference.authority == "user@h:8080")
        #expect(reference.path == "/p/a%2Fb;x")
        #expect(reference.query == "q=1&r=%20")
        #expect(reference.fragment == "f/g")
        #expect(reference.isHTTP)
        #expect(reference.string == "https://user@h:8080/p/a%2Fb;x?q=1&r=%20#f/g")
        #expect(!URIReference(parsing: "data:text/plain,x").isHTTP)
        #expect(URIReference(parsing: "a:b").scheme == "a")
        #expect(URIReference(parsing: "1a:b").scheme == nil)
    }

    @Test func baseWithoutSchemeIsRefused() {
        let error = #expect(throws: PlaylistError.self) { try URIResolver(baseURL: "//h/x.m3u8") }
        #expect(error == .invalidURI)
    }
}
