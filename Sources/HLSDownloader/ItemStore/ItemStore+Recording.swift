import Foundation
import GRDB

/// The segments of live recordings (`item_recording`): one row per segment stored or missed, per rendition, in
/// order, written in the same transaction as the item's progress so a recording killed at any point resumes from
/// its last row.
extension ItemStore {
    private static let recordingEncoder = JSONEncoder()
    private static let recordingDecoder = JSONDecoder()

    /// Appends `segments` to rendition `rendition` of the item's recording, adds `seconds` to its recorded seconds and
    /// `gaps` to its gaps (the longest rendition's seconds count).
    package func appendRecorded(
        _ id: String, rendition: Int, _ segments: [RecordedSegment], renditionSeconds: Double, gaps: Int
    ) throws(DownloadError) {
        try write { db in
            var position =
                try Int.fetchOne(
                    db, sql: "SELECT MAX(position) FROM item_recording WHERE item_id = ? AND rendition = ?", arguments: [id, rendition])
                ?? -1
            let insert = try db.cachedStatement(
                sql: "INSERT INTO item_recording (item_id, rendition, position, sequence, segment) VALUES (?, ?, ?, ?, ?)")
            for segment in segments {
                position += 1
                let text = String(decoding: try Self.recordingEncoder.encode(segment), as: UTF8.self)
                try insert.execute(arguments: [id, rendition, position, Int64(bitPattern: segment.sequence), text])
            }
            guard var record = try self.recordSpec(db, id: id) else { return }
            record.recordedSeconds = max(record.recordedSeconds, renditionSeconds)
            record.gaps += gaps
            let json = String(decoding: try Self.recordingEncoder.encode(record), as: UTF8.self)
            try db.execute(
                sql: "UPDATE items SET record = ?, updated_at = ? WHERE id = ?", arguments: [json, Date().timeIntervalSince1970, id])
        }
    }

    /// The item's recorded segments of rendition `rendition`, in order.
    package func recorded(_ id: String, rendition: Int) throws(DownloadError) -> [RecordedSegment] {
        try read { db in
            try String.fetchAll(
                db, sql: "SELECT segment FROM item_recording WHERE item_id = ? AND rendition = ? ORDER BY position",
                arguments: [id, rendition]
            ).compactMap { try? Self.recordingDecoder.decode(RecordedSegment.self, from: Data($0.utf8)) }
        }
    }

    /// The last origin media sequence number recorded for rendition `rendition` and the seconds recorded in it.
    package func recordedEnd(_ id: String, rendition: Int) throws(DownloadError) -> (sequence: UInt64, seconds: Double)? {
        try read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT MAX(position), sequence, (SELECT SUM(json_extract(segment, '$.duration')) FROM item_recording
                          WHERE item_id = ?1 AND rendition = ?2) FROM item_recording WHERE item_id = ?1 AND rendition = ?2
                        """, arguments: [id, rendition]),
                let sequence = row[1] as Int64?
            else { return nil }
            return (UInt64(bitPattern: sequence), (row[2] as Double?) ?? 0)
        }
    }

    /// Changes the item's ``RecordSpec`` in one transaction (its end, ended).
    package func updateRecord(_ id: String, _ change: @Sendable (inout RecordSpec) -> Void) throws(DownloadError) {
        try write { db in
            guard var record = try self.recordSpec(db, id: id) else { return }
            change(&record)
            let json = String(decoding: try Self.recordingEncoder.encode(record), as: UTF8.self)
            try db.execute(
                sql: "UPDATE items SET record = ?, updated_at = ? WHERE id = ?", arguments: [json, Date().timeIntervalSince1970, id])
        }
    }

    private func recordSpec(_ db: Database, id: String) throws -> RecordSpec? {
        try String.fetchOne(db, sql: "SELECT record FROM items WHERE id = ?", arguments: [id]).flatMap {
            try? Self.recordingDecoder.decode(RecordSpec.self, from: Data($0.utf8))
        }
    }

    /// Adds resources to the end of the item's list (a recording's new segments, keys, init sections); those it
    /// lists already are left as they are.
    package func appendResources(_ id: String, _ resources: [ItemResource]) throws(DownloadError) {
        guard !resources.isEmpty else { return }
        try write { db in
            var position =
                try Int.fetchOne(db, sql: "SELECT MAX(position) FROM item_resources WHERE item_id = ?", arguments: [id]) ?? -1
            let insert = try db.cachedStatement(
                sql: """
                    INSERT INTO item_resources (item_id, key, url, kind, size, done, position) VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(item_id, key) DO NOTHING
                    """)
            for resource in resources {
                position += 1
                try insert.execute(arguments: [id, resource.key, resource.url, resource.kind, resource.size, resource.done, position])
            }
        }
    }
}
