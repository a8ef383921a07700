// Shared by the test suite and the libFuzzer target (Fuzz/run.sh compiles this file into the fuzzer), so the
// property the fuzzer hunts for is the one the regression tests check.
#if !FUZZING
    import HLSPlaylist
    import HLSTestSupport
#endif

/// Why an input broke the engine's promises.
struct PlaylistPropertyViolation: Error, CustomStringConvertible {
    var description: String
}

/// The engine's promises for arbitrary bytes: parsing either throws a ``PlaylistError`` or yields a playlist
/// that serializes to the same bytes, whose no-op rewrite is the identity, whose real rewrite re-parses with
/// the same URIs in the same roles, and whose views do not crash.
func checkPlaylistProperty(_ bytes: [UInt8]) throws(PlaylistPropertyViolation) {
    try checkTolerantPlaylistProperty(bytes)
    let playlist: Playlist
    do {
        playlist = try Playlist(bytes: bytes, options: ParseOptions(maxBytes: 1 << 20))
    } catch {
        return  // a typed error is a correct answer for garbage
    }
    guard playlist.serialize() == bytes else { throw PlaylistPropertyViolation(description: "serialize() differs from input") }
    let base = "https://origin.example/a/b/index.m3u8?token=1&v=2"
    do {
        let unchanged = try playlist.rewrite(baseURL: base) { _, _ in nil }
        guard unchanged == bytes else { throw PlaylistPropertyViolation(description: "no-op rewrite changed bytes") }
    } catch let violation as PlaylistPropertyViolation {
        throw violation
    } catch {
        // Undefined variables and the like are reported as errors: fine.
    }
    do {
        var roles: [URIRole] = []
        let rewritten = try playlist.rewrite(baseURL: base) { url, role in
            roles.append(role)
            return "/proxy/\(role.rawValue)/" + url.utf8.count.description
        }
        let again = try Playlist(bytes: rewritten)
        let before = playlist.uriSlots.map(\.role)
        let after = again.uriSlots.map(\.role)
        guard before == after else {
            throw PlaylistPropertyViolation(description: "rewrite changed the URI slots: \(before) -> \(after)")
        }
        guard again.kind == playlist.kind, again.lines.count == playlist.lines.count else {
            throw PlaylistPropertyViolation(description: "rewrite changed the structure")
        }
    } catch let violation as PlaylistPropertyViolation {
        throw violation
    } catch let error as PlaylistError {
        if error == .invalidReplacement || error == .undefinedVariable || error == .invalidURI { return }
        throw PlaylistPropertyViolation(description: "rewrite output does not re-parse: \(error)")
    } catch {
        throw PlaylistPropertyViolation(description: "unexpected error type \(error)")
    }
    _ = try? playlist.media(baseURL: base)
    _ = try? playlist.master(baseURL: base)
}

/// The tolerant reader's promises (the proxy's serve path): for arbitrary bytes it throws only `notHLS` or `tooLarge`;
/// otherwise the playlist serializes to the same bytes, its no-op rewrite is the identity, its real rewrite re-reads
/// with the same URIs in the same roles, and its views do not throw.
func checkTolerantPlaylistProperty(_ bytes: [UInt8]) throws(PlaylistPropertyViolation) {
    let options = ParseOptions(maxBytes: 1 << 20, tolerant: true)
    let playlist: Playlist
    do {
        playlist = try Playlist(bytes: bytes, options: options)
    } catch let error as PlaylistError {
        if error == .notHLS || error == .tooLarge { return }
        throw PlaylistPropertyViolation(description: "the tolerant reader threw \(error)")
    } catch {
        throw PlaylistPropertyViolation(description: "unexpected error type \(error)")
    }
    guard playlist.serialize() == bytes else { throw PlaylistPropertyViolation(description: "tolerant: serialize() differs from input") }
    let base = "https://origin.example/a/b/index.m3u8?token=1&v=2"
    do {
        let unchanged = try playlist.rewrite(baseURL: base, keepingUnresolved: true, using: TolerantNoOpRewriter())
        guard unchanged == bytes else { throw PlaylistPropertyViolation(description: "tolerant: no-op rewrite changed bytes") }
        let rewritten = try playlist.rewrite(baseURL: base, keepingUnresolved: true, using: TolerantProxyRewriter())
        let again = try Playlist(bytes: rewritten, options: options)
        guard again.uriSlots.map(\.role) == playlist.uriSlots.map(\.role) else {
            throw PlaylistPropertyViolation(description: "tolerant: rewrite changed the URI slots")
        }
        guard again.kind == playlist.kind, again.lines.count == playlist.lines.count else {
            throw PlaylistPropertyViolation(description: "tolerant: rewrite changed the structure")
        }
        _ = try playlist.media(baseURL: base)
        _ = try playlist.master(baseURL: base)
    } catch let violation as PlaylistPropertyViolation {
        throw violation
    } catch let error as PlaylistError {
        if error == .invalidReplacement || error == .invalidURI { return }
        throw PlaylistPropertyViolation(description: "tolerant: \(error)")
    } catch {
        throw PlaylistPropertyViolation(description: "unexpected error type \(error)")
    }
}

struct TolerantNoOpRewriter: URIRewriter {
    func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? { nil }
}

struct TolerantProxyRewriter: URIRewriter {
    func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? { "/proxy/\(role.rawValue)/" + resolvedURL.utf8.count.description }
}
