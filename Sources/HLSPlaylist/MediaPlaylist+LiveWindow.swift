/// What a reading of a live media playlist says about the media it lists (docs/architecture.md, live segments): how
/// long a stored copy stays worth serving, and which URLs that applies to.
extension MediaPlaylist {
    /// How long what this reading lists stays useful from the reading on: the window's duration (a segment listed now
    /// can stay listed that long) plus two target durations (a player that read it just before it left the window,
    /// still asking for it). A target duration of 10 s when the playlist gives none.
    public var liveWindowLifetime: Double {
        segments.reduce(0) { $0 + $1.duration } + 2 * Double(targetDuration ?? 10)
    }

    /// The absolute URLs of every segment, partial segment and init section listed (each once).
    public var listedMediaURLs: Set<String> {
        var urls = Set(segments.map(\.url))
        urls.formUnion(parts.map(\.url))
        urls.formUnion(segments.compactMap { $0.map?.url })
        return urls
    }
}
