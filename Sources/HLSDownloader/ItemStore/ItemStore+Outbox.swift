import Foundation
import GRDB

/// A webhook event that waits for its delivery across a restart of `serve` (`webhook_outbox` in `items.sqlite`):
/// the events still queued when the notifier stopped, delivered first at the next start, in order, as they were
/// (the same body, so the same signature under the same secret, and the same delivery id).
package struct WebhookOutboxEntry: Sendable, Hashable {
    /// The receiver's URL (`webhooks.urls`).
    package var receiver: String
    /// The delivery id (`X-Hlscache-Delivery`).
    package var delivery: String
    /// The event type (`X-Hlscache-Event`).
    package var type: String
    /// The exact JSON body that is signed.
    package var body: String

    package init(receiver: String, delivery: String, type: String, body: String) {
        self.receiver = receiver
        self.delivery = delivery
        self.type = type
        self.body = body
    }
}

extension ItemStore {
    /// Appends `entries` (in their order) to the outbox, then keeps at most `limit` per receiver, dropping the oldest.
    /// - Returns: how many were dropped.
    @discardableResult
    package func saveWebhookOutbox(_ entries: [WebhookOutboxEntry], limit: Int) throws(DownloadError) -> Int {
        guard !entries.isEmpty else { return 0 }
        return try write { db in
            let insert = try db.cachedStatement(sql: "INSERT INTO webhook_outbox (receiver, delivery, type, body) VALUES (?, ?, ?, ?)")
            for entry in entries { try insert.execute(arguments: [entry.receiver, entry.delivery, entry.type, entry.body]) }
            var dropped = 0
            for receiver in Set(entries.map(\.receiver)) {
                try db.execute(
                    sql: """
                        DELETE FROM webhook_outbox WHERE receiver = ?1 AND position NOT IN
                          (SELECT position FROM webhook_outbox WHERE receiver = ?1 ORDER BY position DESC LIMIT ?2)
                        """, arguments: [receiver, max(0, limit)])
                dropped += db.changesCount
            }
            return dropped
        }
    }

    /// Every entry of the outbox, oldest first, removed from it in the same transaction (the notifier delivers them).
    package func takeWebhookOutbox() throws(DownloadError) -> [WebhookOutboxEntry] {
        try write { db in
            let entries = try Self.outboxEntries(db)
            try db.execute(sql: "DELETE FROM webhook_outbox")
            return entries
        }
    }

    /// Every entry of the outbox, oldest first (left there).
    package func webhookOutbox() throws(DownloadError) -> [WebhookOutboxEntry] {
        try read { db in try Self.outboxEntries(db) }
    }

    private static func outboxEntries(_ db: Database) throws -> [WebhookOutboxEntry] {
        try Row.fetchAll(db, sql: "SELECT receiver, delivery, type, body FROM webhook_outbox ORDER BY position").map {
            WebhookOutboxEntry(receiver: $0["receiver"], delivery: $0["delivery"], type: $0["type"], body: $0["body"])
        }
    }
}
