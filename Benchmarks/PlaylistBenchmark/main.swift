// Parses, rewrites and serializes a 5,000-segment media playlist and a 50-variant master playlist and prints
// the time per operation and throughput. Run: `swift run -c release PlaylistBenchmark` (or make bench).
import HLSCacheCore
import HLSPlaylist

#if canImport(Glibc)
    import Glibc
#endif

func makeMediaPlaylist(segments: Int) -> String {
    var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n"
    text += "#EXT-X-KEY:METHOD=AES-128,URI=\"https://keys.example.com/k/1?token=abc\",IV=0x00000000000000000000000000000001\n"
    for i in 0..<segments {
        if i > 0 && i % 1000 == 0 { text += "#EXT-X-KEY:METHOD=AES-128,URI=\"../keys/key\(i / 1000).bin\"\n" }
        text += "#EXTINF:6.006000,\n"
        text += "video/1080p/segment_\(String(repeating: "0", count: 6 - String(i).count))\(i).ts?v=2\n"
    }
    text += "#EXT-X-ENDLIST\n"
    return text
}

func makeMasterPlaylist(variants: Int) -> String {
    var text = "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-INDEPENDENT-SEGMENTS\n"
    for lang in ["en", "fr", "de", "es"] {
        text +=
            "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud\",LANGUAGE=\"\(lang)\",NAME=\"\(lang)\",AUTOSELECT=YES,URI=\"audio/\(lang)/index.m3u8\"\n"
    }
    for i in 0..<variants {
        let bandwidth = 200_000 + i * 150_000
        text +=
            "#EXT-X-STREAM-INF:BANDWIDTH=\(bandwidth),AVERAGE-BANDWIDTH=\(bandwidth * 9 / 10),RESOLUTION=\(320 + i * 32)x\(180 + i * 18),"
        text += "CODECS=\"avc1.640028,mp4a.40.2\",FRAME-RATE=29.970,AUDIO=\"aud\"\n"
        text += "video/v\(i)/index.m3u8\n"
        text += "#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=\(bandwidth / 10),URI=\"video/v\(i)/iframes.m3u8\"\n"
    }
    return text
}

/// What the proxy does with every resolved URL: `https://host/p?q` → `/https/host/p?q`, in one allocation.
@inline(never)
func proxyPath(_ url: String) -> String {
    var url = url
    return url.withUTF8 { u in
        guard let colon = u.firstIndex(of: UInt8(ascii: ":")), colon + 3 <= u.count else { return String(decoding: u, as: UTF8.self) }
        // "scheme://rest" -> "/scheme/rest": same length, bytes moved.
        return String(unsafeUninitializedCapacity: u.count) { out in
            out[0] = UInt8(ascii: "/")
            for k in 0..<colon { out[k + 1] = u[k] }
            out[colon + 1] = UInt8(ascii: "/")
            for k in (colon + 3)..<u.count { out[k] = u[k] }
            return u.count
        }
    }
}

struct Measurement {
    var name: String
    var bytes: Int
    var samples: [Duration]
    var median: Duration { samples.sorted()[samples.count / 2] }
    var best: Duration { samples.min()! }
    func line() -> String {
        // name, median, best, throughput at the median
        let micros = Double(median.components.attoseconds) / 1e12 + Double(median.components.seconds) * 1e6
        let bestMicros = Double(best.components.attoseconds) / 1e12 + Double(best.components.seconds) * 1e6
        let mbps = Double(bytes) / micros  // bytes per µs = MB/s
        return
            "\(name.padding(38)) \(String(format1: micros).leftPad(10)) µs median  \(String(format1: bestMicros).leftPad(10)) µs best  \(String(format1: mbps).leftPad(8)) MB/s"
    }
}

extension String {
    init(format1 value: Double) {
        let scaled = (value * 10).rounded() / 10
        self = "\(scaled)"
    }
    func padding(_ n: Int) -> String { count >= n ? self : self + String(repeating: " ", count: n - count) }
    func leftPad(_ n: Int) -> String { count >= n ? self : String(repeating: " ", count: n - count) + self }
}

/// A second argument (`PlaylistBenchmark 200 proxy`) runs only the measurements whose name contains "proxy" (for profiling).
let only = CommandLine.arguments.count > 2 ? CommandLine.arguments[2] : nil

func measure(_ name: String, bytes: Int, iterations: Int, _ body: () throws -> Int) rethrows -> Measurement {
    if let only, !name.contains(only) { return Measurement(name: name + " (skipped)", bytes: bytes, samples: [.zero]) }
    var sink = 0
    for _ in 0..<max(3, iterations / 10) { sink &+= try body() }  // warm-up
    var samples: [Duration] = []
    let clock = ContinuousClock()
    for _ in 0..<iterations {
        let start = clock.now
        sink &+= try body()
        samples.append(clock.now - start)
    }
    if sink == 42 { print("") }  // keep the work observable
    return Measurement(name: name, bytes: bytes, samples: samples)
}

let iterations = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 200 : 200
let media = Array(makeMediaPlaylist(segments: 5000).utf8)
let master = Array(makeMasterPlaylist(variants: 50).utf8)
let mediaBase = "https://cdn.example.com/vod/movie/index.m3u8?token=xyz"
let masterBase = "https://cdn.example.com/vod/movie/master.m3u8"

print("media playlist: 5000 segments, \(media.count) bytes; master playlist: 50 variants, \(master.count) bytes; \(iterations) iterations")
var results: [Measurement] = []
results.append(try measure("media parse", bytes: media.count, iterations: iterations) { try Playlist(bytes: media).lines.count })
let parsedMedia = try Playlist(bytes: media)
results.append(
    try measure("media closure rewrite+serialize", bytes: media.count, iterations: iterations) {
        try parsedMedia.rewrite(baseURL: mediaBase) { url, _ in proxyPath(url) }.count
    })
results.append(
    try measure("media parse+closure rewrite+serialize", bytes: media.count, iterations: iterations) {
        try Playlist(bytes: media).rewrite(baseURL: mediaBase) { url, _ in proxyPath(url) }.count
    })
results.append(
    try measure("media parse+proxy rewrite+serialize", bytes: media.count, iterations: iterations) {
        try Playlist(bytes: media).rewrite(baseURL: mediaBase, using: ProxyPathRewriter()).count
    })
results.append(measure("media serialize (lossless)", bytes: media.count, iterations: iterations) { parsedMedia.serialize().count })
results.append(
    try measure("media timeline view", bytes: media.count, iterations: iterations) {
        try parsedMedia.media(baseURL: mediaBase).segments.count
    })
results.append(
    try measure("master parse+proxy rewrite+serialize", bytes: master.count, iterations: iterations * 10) {
        try Playlist(bytes: master).rewrite(baseURL: masterBase, using: ProxyPathRewriter()).count
    })
let parsedMaster = try Playlist(bytes: master)
results.append(
    try measure("master variants view", bytes: master.count, iterations: iterations * 10) {
        try parsedMaster.master(baseURL: masterBase).variants.count
    })
// A cache hit's Last-Modified and an API listing's dates: 1,000 dates per iteration (the per-date cost is a
// thousandth of the figure).
let dateBase: Int64 = 1_764_000_000
results.append(
    measure("1000 HTTP dates", bytes: 29_000, iterations: iterations * 10) {
        var total = 0
        for offset in 0..<Int64(1000) { total &+= HTTPDate.format(dateBase + offset * 37).utf8.count }
        return total
    })
results.append(
    measure("1000 ISO 8601 dates", bytes: 24_000, iterations: iterations * 10) {
        var total = 0
        for offset in 0..<1000 {
            total &+= ISO8601Text.format(epochSeconds: Double(dateBase) + Double(offset) * 37.123, fractionalSeconds: true).utf8.count
        }
        return total
    })
for result in results { print(result.line()) }
