extension ItemStore {
    /// How many items are in each state (every state present, zeros included), for `hlscache_downloads{state}`.
    public func countsByState() throws(DownloadError) -> [String: Int] {
        var counts: [String: Int] = [:]
        for state in ItemState.allCases { counts[state.rawValue] = 0 }
        for item in try items() { counts[item.state.rawValue, default: 0] += 1 }
        return counts
    }
}
