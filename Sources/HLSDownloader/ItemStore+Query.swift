import Foundation
import GRDB

/// Which items a listing wants, in which order, and which page (`hlscache ls`, `GET /api/v1/items`, batch actions).
public struct ItemQuery: Sendable, Hashable {
    /// What a listing is sorted by; ties go by id.
    public enum Sort: String, Sendable, Hashable, CaseIterable {
        case createdAt, updatedAt, title, state, bytes, expiresAt, id

        var column: String {
            switch self {
            case .createdAt: "created_at"
            case .updatedAt: "updated_at"
            // Items without a title sort after those with one, either way.
            case .title: "title IS NULL, title COLLATE NOCASE"
            case .state: "state"
            case .bytes: "bytes_done"
            case .expiresAt: "expires_at IS NULL, expires_at"
            case .id: "id"
            }
        }
    }

    /// Any of these states (empty: any).
    public var states: [ItemState] = []
    /// Every one of these tags.
    public var tags: [String] = []
    /// `true`: never played through the proxy; `false`: played at least once; `nil`: either.
    public var played: Bool?
    /// The origin URL contains this text.
    public var urlContains: String?
    /// Only these ids.
    public var ids: [String]?
    public var sort: Sort = .createdAt
    public var descending = false
    /// The page: at most `limit` items (nil: all) after skipping `offset`.
    public var limit: Int?
    public var offset = 0

    public init() {}

    /// The `WHERE` clause and its arguments.
    func condition() -> (sql: String, arguments: StatementArguments) {
        var clauses: [String] = []
        var arguments = StatementArguments()
        if !states.isEmpty {
            clauses.append("state IN (\(states.map { _ in "?" }.joined(separator: ", ")))")
            for state in states { arguments += [state.rawValue] }
        }
        for tag in tags {
            clauses.append("EXISTS (SELECT 1 FROM json_each(items.tags) WHERE json_each.value = ?)")
            arguments += [tag]
        }
        if let played {
            clauses.append("\(played ? "" : "NOT ")EXISTS (SELECT 1 FROM item_consumption c WHERE c.item_id = items.id)")
        }
        if let urlContains {
            clauses.append("instr(url, ?) > 0")
            arguments += [urlContains]
        }
        if let ids {
            clauses.append(ids.isEmpty ? "0" : "id IN (\(ids.map { _ in "?" }.joined(separator: ", ")))")
            for id in ids { arguments += [id] }
        }
        return (clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND "), arguments)
    }

    var order: String {
        let direction = descending ? " DESC" : ""
        let keys = sort.column.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) + direction }
        return "ORDER BY " + (keys + ["id" + direction]).joined(separator: ", ")
    }
}

extension ItemStore {
    /// One page of the items `query` selects, and how many it selects in all; one read transaction.
    public func list(_ query: ItemQuery) throws(DownloadError) -> (items: [DownloadItem], total: Int) {
        try read { db in
            let (condition, arguments) = query.condition()
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM items \(condition)", arguments: arguments) ?? 0
            var sql = "SELECT * FROM items \(condition) \(query.order)"
            var pageArguments = arguments
            if query.limit != nil || query.offset > 0 {
                sql += " LIMIT ? OFFSET ?"
                pageArguments += [query.limit ?? -1, query.offset]
            }
            return (try Row.fetchAll(db, sql: sql, arguments: pageArguments).map(self.decode), total)
        }
    }

    /// The ids `query` selects (all of them, whatever its page), for batch actions.
    public func ids(_ query: ItemQuery) throws(DownloadError) -> [String] {
        try read { db in
            let (condition, arguments) = query.condition()
            return try String.fetchAll(db, sql: "SELECT id FROM items \(condition) \(query.order)", arguments: arguments)
        }
    }
}
