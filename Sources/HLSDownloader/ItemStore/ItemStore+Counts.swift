import GRDB

extension ItemStore {
    /// How many items are in each state (every state present, zeros included), for `hlscache_downloads{state}`.
    package func countsByState() throws(DownloadError) -> [String: Int] {
        var counts: [String: Int] = [:]
        for state in ItemState.allCases { counts[state.rawValue] = 0 }
        let rows = try read { db in try Row.fetchAll(db, sql: "SELECT state, COUNT(*) AS n FROM items GROUP BY state") }
        for row in rows { counts[row["state"], default: 0] += row["n"] as Int }
        return counts
    }
}
