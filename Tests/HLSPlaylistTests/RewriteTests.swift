import Foundation
import HLSPlaylist
import HLSTestSupport
import Testing

/// `rewrite(baseURL:imports:_:)` changes URI values and nothing else, hands the closure RFC 3986-resolved URLs with
/// the right role, and leaves DRM keys and non-HTTP URIs alone.
@Suite struct RewriteTests {
    static func proxied(_ url: String, _ role: URIRole) -> String { "/proxy/\(role.rawValue)/\(url)" }

    /// Rewrites `bytes` to proxy paths and checks that only URI values changed. Returns what the closure saw.
    @discardableResult
    static func checkRewrite(
        _ bytes: [UInt8], baseURL: String, imports: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [SamplePlaylist.ExpectedURI] {
        let playlist = try Playlist(bytes: bytes)
        var calls: [SamplePlaylist.ExpectedURI] = []
        let out = try playlist.rewrite(baseURL: baseURL, imports: imports) { url, role in
            calls.append(.init(url: url, role: role))
            return proxied(url, role)
        }
        for call in calls {
            let lower = call.url.lowercased()
            #expect(lower.hasPrefix("http://") || lower.hasPrefix("https://"), "closure saw \(call)", sourceLocation: sourceLocation)
        }

        let rewritten = try Playlist(bytes: out)
        #expect(rewritten.serialize() == out, sourceLocation: sourceLocation)
        #expect(rewritten.kind == playlist.kind, sourceLocation: sourceLocation)
        #expect(rewritten.lines.count == playlist.lines.count, sourceLocation: sourceLocation)
        try #require(rewritten.uriSlots.count == playlist.uriSlots.count, sourceLocation: sourceLocation)
        #expect(rewritten.uriSlots.map(\.role) == playlist.uriSlots.map(\.role), sourceLocation: sourceLocation)
        #expect(rewritten.uriSlots.map(\.lineIndex) == playlist.uriSlots.map(\.lineIndex), sourceLocation: sourceLocation)
        #expect(rewritten.uriSlots.map(\.rewritable) == playlist.uriSlots.map(\.rewritable), sourceLocation: sourceLocation)

        // Each changed value is the closure's answer for the next call, in document order; every other value is as written.
        var next = 0
        for (before, after) in zip(playlist.uriSlots, rewritten.uriSlots) {
            let original = playlist.rawValue(of: before), now = rewritten.rawValue(of: after)
            guard now != original else { continue }
            try #require(next < calls.count, "value \(now) changed without a closure call", sourceLocation: sourceLocation)
            #expect(before.rewritable, sourceLocation: sourceLocation)
            #expect(now == proxied(calls[next].url, calls[next].role), sourceLocation: sourceLocation)
            #expect(before.role == calls[next].role, sourceLocation: sourceLocation)
            next += 1
        }
        #expect(next == calls.count, sourceLocation: sourceLocation)

        // Putting the original values back into the output's slots gives the input exactly.
        var restored: [UInt8] = []
        var cursor = 0
        for (before, after) in zip(playlist.uriSlots, rewritten.uriSlots) {
            restored += out[cursor..<after.range.lowerBound]
            restored += bytes[before.range]
            cursor = after.range.upperBound
        }
        restored += out[cursor...]
        #expect(restored == bytes, sourceLocation: sourceLocation)
        return calls
    }

    // MARK: - Fixtures

    /// An oracle independent of the engine: fixtures hold absolute URLs or plain relative paths, and the role
    /// follows from the line it is on.
    static func fixtureExpectations(_ name: String) throws -> [SamplePlaylist.ExpectedURI] {
        let text = try Fixtures.text(name)
        let directory = "https://cdn.example.com/vod/show/"
        var result: [SamplePlaylist.ExpectedURI] = []
        for line in text.split(separator: "\n") {
            func resolve(_ raw: Substring) -> String { raw.contains("://") ? String(raw) : directory + raw }
            if line.hasPrefix("#") {
                guard let uriStart = line.range(of: "URI=\"") else { continue }
                let value = line[uriStart.upperBound...].prefix { $0 != "\"" }
                let role: URIRole
                if line.hasPrefix("#EXT-X-KEY:") {
                    role = .key
                } else if line.hasPrefix("#EXT-X-MAP:") {
                    role = .map
                } else if line.hasPrefix("#EXT-X-MEDIA:") {
                    role = .rendition
                } else {
                    Issue.record("unexpected URI-bearing line in \(name): \(line)")
                    continue
                }
                result.append(.init(url: resolve(value), role: role))
            } else {
                result.append(.init(url: resolve(line), role: name == "master.m3u8" ? .variant : .segment))
            }
        }
        return result
    }

    @Test(arguments: Fixtures.names, [TextVariant.asIs, .crlf, .bom, .everything])
    func fixtureRewritesOnlyURIs(name: String, variant: TextVariant) throws {
        let bytes = variant.apply(to: try Fixtures.text(name))
        let calls = try Self.checkRewrite(bytes, baseURL: Fixtures.baseURL(name))
        #expect(calls == (try Self.fixtureExpectations(name)))
        #expect(!calls.isEmpty)
    }

    @Test func fixtureRewriteLooksRight() throws {
        let out = try Playlist(try Fixtures.text("fmp4.m3u8")).rewrite(baseURL: Fixtures.baseURL("fmp4.m3u8")) { url, role in
            Self.proxied(url, role)
        }
        let text = String(decoding: out, as: UTF8.self)
        #expect(text.contains("#EXT-X-MAP:URI=\"/proxy/map/https://cdn.example.com/vod/show/init.mp4\"\n"))
        #expect(text.contains("#EXTINF:2.000000,\n/proxy/segment/https://cdn.example.com/vod/show/seg_000.m4s\n"))
    }

    // MARK: - Hand-written playlists

    @Test(arguments: SamplePlaylists.all, [TextVariant.asIs, .crlf, .bom, .trailingSpaces, .everything])
    func sampleRewritesOnlyURIs(sample: SamplePlaylist, variant: TextVariant) throws {
        let calls = try Self.checkRewrite(variant.apply(to: sample.text), baseURL: sample.baseURL, imports: sample.imports)
        #expect(calls == sample.expected)
    }

    @Test(arguments: SamplePlaylists.all)
    func resolvedURIsMatchRewrite(sample: SamplePlaylist) throws {
        let resolved = try Playlist(sample.text).resolvedURIs(baseURL: sample.baseURL, imports: sample.imports)
        #expect(resolved.map { SamplePlaylist.ExpectedURI(url: $0.url, role: $0.role) } == sample.expected)
    }

    /// Together the samples exercise every role of docs/design.md §4.
    @Test func samplesCoverEveryRole() {
        let roles = Set(SamplePlaylists.all.flatMap { $0.expected.map(\.role) })
        #expect(roles == Set(URIRole.allCases))
    }

    /// Keys of every method in the identity key format are handed over (issue 31): their URI's answer is the key.
    @Test func keysOfEveryMethodAreHandedOver() throws {
        let methods = ["AES-128", "SAMPLE-AES", "SAMPLE-AES-CTR", "AES-256", "AES-256-CTR"]
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n"
        for (index, method) in methods.enumerated() {
            let format = index % 2 == 0 ? "" : ",KEYFORMAT=\"identity\""
            text += "#EXT-X-KEY:METHOD=\(method),URI=\"keys/\(index).key\"\(format)\n#EXTINF:4,\ns\(index).ts\n"
        }
        let playlist = try Playlist(text)
        #expect(playlist.uriSlots.filter { $0.role == .key }.allSatisfy { $0.rewritable })
        var keys: [String] = []
        _ = try playlist.rewrite(baseURL: "https://origin.example.com/a/b.m3u8") { url, role in
            if role == .key { keys.append(url) }
            return nil
        }
        #expect(keys == (0..<methods.count).map { "https://origin.example.com/a/keys/\($0).key" })
        let segments = try playlist.media(baseURL: "https://origin.example.com/a/b.m3u8").segments
        #expect(segments.allSatisfy { $0.key?.isFetchable == true })
    }

    @Test func drmKeysAndNonHTTPURIsAreUntouched() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="https://licence.example/k",KEYFORMAT="com.microsoft.playready"
            #EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="keys/cenc.key",KEYFORMAT="urn:uuid:1077efec-c0b2-4d02-ace3-3c1e52e2fb4b"
            #EXT-X-KEY:METHOD=AES-128,URI="skd://vendor/key",KEYFORMAT="com.vendor"
            #EXT-X-KEY:METHOD=AES-128,URI="data:application/octet-stream;base64,AAECAwQFBgcICQoLDA0ODw=="
            #EXTINF:4,
            data:video/mp2t;base64,R0A=
            #EXTINF:4,
            ftp://files.example.com/seg.ts
            #EXT-X-ENDLIST

            """
        let playlist = try Playlist(text)
        #expect(playlist.uriSlots.map(\.rewritable) == [false, false, false, true, true, true])
        let out = try playlist.rewrite(baseURL: "https://origin.example.com/a/b.m3u8") { url, role in
            Issue.record("closure called for \(role) \(url)")
            return "/proxy"
        }
        #expect(out == Array(text.utf8))
    }

    @Test func nilKeepsTheOriginalValue() throws {
        let sample = SamplePlaylists.lowLatency
        let playlist = try Playlist(sample.text)
        let out = try playlist.rewrite(baseURL: sample.baseURL) { url, role in
            role == .segment ? "/s/\(url.split(separator: "/").last!)" : nil
        }
        let expected = sample.text.replacingOccurrences(of: "\nseg11", with: "\n/s/seg11")
        #expect(String(decoding: out, as: UTF8.self) == expected)
    }

    @Test func closureErrorsPropagate() throws {
        struct Refused: Error {}
        let playlist = try Playlist(SamplePlaylists.master.text)
        #expect(throws: Refused.self) {
            try playlist.rewrite(baseURL: SamplePlaylists.base) { _, role in
                if role == .variant { throw Refused() }
                return nil
            }
        }
    }

    @Test func relativeBaseIsRefused() throws {
        let playlist = try Playlist("#EXTM3U\n#EXTINF:1,\nseg.ts\n")
        let error = #expect(throws: PlaylistError.self) {
            try playlist.rewrite(baseURL: "/no/scheme/index.m3u8") { url, _ in url }
        }
        #expect(error == .invalidURI)
    }
}
