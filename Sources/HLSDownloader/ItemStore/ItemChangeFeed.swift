import Synchronization

/// Follows the items table for a poller (the admin API's event stream): the first ``next()`` returns every item,
/// later ones only the items inserted or changed since — by any process — and the ids removed, so a poll costs
/// what changed, not what is stored.
package final class ItemChangeFeed: Sendable {
    /// One poll's news.
    package struct Changes: Sendable {
        /// Items inserted or changed (all items on the first poll), in the order they changed.
        package var changed: [DownloadItem]
        /// Ids of items removed since the last poll.
        package var removed: [String]
        /// Whether this is the first poll (everything is new).
        package var isFirst: Bool

        package init(changed: [DownloadItem], removed: [String], isFirst: Bool) {
            self.changed = changed
            self.removed = removed
            self.isFirst = isFirst
        }
    }

    private struct Position: Sendable {
        var sequence: Int64?
        var known: Set<String> = []
    }

    private let items: ItemStore
    private let position = Mutex(Position())

    package init(items: ItemStore) {
        self.items = items
    }

    /// Reads what changed since the previous call. Calls are serialised; a failed read changes nothing.
    /// - Parameter alsoKnown: ids the caller learned of elsewhere (the downloader's own events) and may not have been
    ///   polled yet: reported as removed too when they are gone, even if a poll never saw them.
    package func next(alsoKnown: Set<String> = []) throws(DownloadError) -> Changes {
        try position.withLock { position throws(DownloadError) -> Changes in
            let isFirst = position.sequence == nil
            let (sequence, changed, removed) = try items.changes(
                since: position.sequence, known: isFirst ? [] : position.known.union(alsoKnown))
            if isFirst { position.known = Set(changed.map(\.id)) } else { position.known.formUnion(changed.map(\.id)) }
            position.known.subtract(removed)
            position.sequence = sequence
            return Changes(changed: changed, removed: removed, isFirst: isFirst)
        }
    }
}
