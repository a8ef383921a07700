// libFuzzer entry point: arbitrary bytes → parse + rewrite + serialize, checking checkPlaylistProperty.
// Built by Fuzz/run.sh together with the HLSPlaylist sources (no package build needed).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPlaylist(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    do {
        try checkPlaylistProperty(bytes)
    } catch {
        fatalError("property violated: \(error)")
    }
    return 0
}
