// libFuzzer entry point for the pure parts of the HTTP request path: the proxied request target
// (`OriginURL(proxyTarget:)`, path traversal and authority checks) and the `Range` header.
// Built by Fuzz/run-request.sh together with the HLSPlaylist, HLSCacheCore and RangeRequest sources.
//
// Properties checked on every input (besides "does not crash"):
// - an accepted target has no dot segment (raw or percent-encoded), a host without '/', '@', '\' or spaces, a
//   port in 1…65535, and its `proxyPath` parses back to the same URL;
// - a `Range` header resolved against any size gives 0 ≤ first ≤ last < size, or full / unsatisfiable.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    checkTarget("/" + text)
    checkTarget("/https/" + text)
    checkTarget(text)
    for size in [0, 1, 100, Int64(bytes.count), Int64.max / 2] {
        checkRange("bytes=" + text, size: size)
        checkRange(text, size: size)
    }
    return 0
}

func checkTarget(_ target: String) {
    guard let url = try? OriginURL(proxyTarget: target) else { return }
    guard url.scheme == "http" || url.scheme == "https" else { fatalError("scheme \(url.scheme) from \(target.debugDescription)") }
    for segment in url.path.split(separator: "/", omittingEmptySubsequences: false) {
        let lowered = segment.lowercased().replacing("%2e", with: ".")
        if lowered == "." || lowered == ".." { fatalError("dot segment accepted: \(target.debugDescription)") }
    }
    if url.host.isEmpty || url.host.contains(where: { "/@\\ \t\r\n?#".contains($0) }) {
        fatalError("bad host \(url.host.debugDescription) from \(target.debugDescription)")
    }
    if let port = url.port, !(1...65535).contains(port) { fatalError("port \(port) from \(target.debugDescription)") }
    guard let again = try? OriginURL(proxyTarget: url.proxyPath) else {
        fatalError("proxyPath \(url.proxyPath.debugDescription) of \(target.debugDescription) does not parse")
    }
    if again != url { fatalError("round trip changed \(url) into \(again)") }
}

func checkRange(_ header: String, size: Int64) {
    switch RangeRequest(header: header, size: size) {
    case .full, .unsatisfiable: break
    case .partial(let first, let last):
        if !(first >= 0 && first <= last && last < size) { fatalError("range \(first)-\(last) of \(size) from \(header.debugDescription)") }
    }
}
