/// What startup recovery found and repaired, for logs and tests.
package struct CacheRecoveryReport: Sendable, Hashable {
    /// Whether this process had the directory to itself and ran the full recovery. When another process
    /// (the server, or `hlscache fetch`) already has it open, only repairs that cannot race it run.
    package var exclusive: Bool = false
    /// Whether the full pass ran (rows checked against files, orphans removed, totals recounted): only when alone
    /// and a previous process did not close the store (a crash, a kill, a power cut), or the directory had no
    /// session records yet.
    package var full: Bool = false
    /// Temp files of crashed writers removed from `tmp/`.
    package var tempFilesRemoved: Int = 0
    /// Index rows dropped because their file was missing or had the wrong size.
    package var rowsDropped: Int = 0
    /// Object files removed because no index row names them (only in exclusive recovery).
    package var orphanFilesRemoved: Int = 0
    /// Whether the full pass found the usage totals off and set them from the rows.
    package var totalsRecounted: Bool = false
    /// Complete objects in the index after recovery.
    package var objectCount: Int = 0

    /// An empty report.
    package init() {}

    /// Whether recovery changed anything (files removed, rows dropped, totals set).
    package var repairedAnything: Bool {
        tempFilesRemoved > 0 || rowsDropped > 0 || orphanFilesRemoved > 0 || totalsRecounted
    }

    /// One line for the log: what was repaired, or that the check found nothing.
    package var summary: String {
        var parts: [String] = []
        if tempFilesRemoved > 0 {
            parts.append("removed \(tempFilesRemoved) unfinished download\(tempFilesRemoved == 1 ? "" : "s") from tmp/")
        }
        if rowsDropped > 0 {
            parts.append("forgot \(rowsDropped) object\(rowsDropped == 1 ? "" : "s") whose file was missing or of the wrong size")
        }
        if orphanFilesRemoved > 0 {
            parts.append("removed \(orphanFilesRemoved) file\(orphanFilesRemoved == 1 ? "" : "s") no object names")
        }
        if totalsRecounted { parts.append("recounted the usage totals") }
        let objects = "\(objectCount) object\(objectCount == 1 ? "" : "s") stored"
        if parts.isEmpty {
            return full ? "cache checked (every object against its file): nothing to repair; \(objects)" : "cache opened; \(objects)"
        }
        return "cache repaired (a process stopped uncleanly): " + parts.joined(separator: ", ") + "; \(objects)"
    }
}
