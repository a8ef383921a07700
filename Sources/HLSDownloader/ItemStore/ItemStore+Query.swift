import Foundation
import GRDB

/// Which items a listing wants, in which order, and which page (`hlscache ls`, `GET /api/v1/items`, batch actions).
package struct ItemQuery: Sendable, Hashable {
    /// What a listing is sorted by; ties go by id.
    package enum Sort: String, Sendable, Hashable, CaseIterable {
        case createdAt, updatedAt, title, state, bytes, expiresAt, completedAt, id

        /// The expressions a listing is ordered by, before the id. Written so that no key is NULL (`title IS NULL`
        /// first, then the title or ''): a cursor compares the row values of these keys, and NULL compares as unknown.
        var keys: [String] {
            switch self {
            case .createdAt: ["created_at"]
            case .updatedAt: ["updated_at"]
            // Items without a title sort after those with one ascending, before them descending (every key is DESC).
            case .title: ["title IS NULL", "COALESCE(title, '') COLLATE NOCASE"]
            case .state: ["state"]
            case .bytes: ["bytes_done"]
            case .expiresAt: ["expires_at IS NULL", "COALESCE(expires_at, 0)"]
            // Items not completed yet sort after the completed ones ascending, before them descending.
            case .completedAt: ["completed_at IS NULL", "COALESCE(completed_at, 0)"]
            case .id: []
            }
        }
    }

    /// Where a page starts in cursor paging (`after=` of `GET /items`): just after the item whose sort keys and id it
    /// holds, so items created or removed between two pages neither shift the next page (offsets do) nor make it skip
    /// or repeat any. Opaque to clients: a base64url token of the listing's sort, direction, the last item's keys and id.
    package struct Cursor: Sendable, Hashable {
        package var sort: Sort
        package var descending: Bool
        /// The values of ``Sort/keys`` for the last item of the page before.
        var values: [DatabaseValue]
        package var id: String

        /// The cursor of `token`, or `nil` when it is not one.
        package init?(token: String) {
            var base64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while base64.count % 4 != 0 { base64 += "=" }
            guard token.count <= 4096, let data = Data(base64Encoded: base64),
                let list = (try? JSONSerialization.jsonObject(with: data)) as? [Any], list.count == 5, list[0] as? Int == 1,
                let sort = (list[1] as? String).flatMap(Sort.init(rawValue:)), let descending = list[2] as? Bool,
                let encoded = list[3] as? [[String]], encoded.count == sort.keys.count, let id = list[4] as? String
            else { return nil }
            var values: [DatabaseValue] = []
            for pair in encoded {
                guard pair.count == 2 else { return nil }
                switch pair[0] {
                case "i": guard let value = Int64(pair[1]) else { return nil }; values.append(value.databaseValue)
                case "d": guard let value = Double(pair[1]), value.isFinite else { return nil }; values.append(value.databaseValue)
                case "s": values.append(pair[1].databaseValue)
                default: return nil
                }
            }
            self.sort = sort
            self.descending = descending
            self.values = values
            self.id = id
        }

        init(sort: Sort, descending: Bool, values: [DatabaseValue], id: String) {
            self.sort = sort
            self.descending = descending
            self.values = values
            self.id = id
        }

        /// The opaque token (`nextCursor`).
        package var token: String {
            let encoded: [[String]] = values.map { value in
                switch value.storage {
                case .int64(let number): ["i", String(number)]
                case .double(let number): ["d", "\(number)"]  // the shortest text that reads back as the same double
                case .string(let text): ["s", text]
                case .blob, .null: ["s", ""]
                }
            }
            let list: [Any] = [1, sort.rawValue, descending, encoded, id]
            let data = (try? JSONSerialization.data(withJSONObject: list)) ?? Data()
            return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
    }

    /// Any of these states (empty: any).
    package var states: [ItemState] = []
    /// Every one of these tags.
    package var tags: [String] = []
    /// `true`: played at least once through the proxy; `false`: never played; `nil`: either.
    package var played: Bool?
    /// The origin URL contains this text.
    package var urlContains: String?
    /// Only these ids.
    package var ids: [String]?
    /// Locked (`true`) or not (`false`); `nil`: either.
    package var locked: Bool?
    /// The title or the origin URL contains this text, ignoring ASCII case (`q=`, `ls --search`).
    package var text: String?
    package var sort: Sort = .createdAt
    package var descending = false
    /// The page: at most `limit` items (nil: all) after skipping `offset`, or after the `after` cursor.
    package var limit: Int?
    package var offset = 0
    /// Cursor paging: the page starts after this cursor's item (``Cursor``); not with `offset`.
    package var after: Cursor?

    package init() {}

    /// The `WHERE` clause and its arguments.
    func condition() -> (sql: String, arguments: StatementArguments) {
        var clauses: [String] = []
        var arguments = StatementArguments()
        if !states.isEmpty {
            clauses.append("state IN (\(states.map { _ in "?" }.joined(separator: ", ")))")
            for state in states { arguments += [state.rawValue] }
        }
        for tag in tags {
            // `item_tags` (its `(tag, item_id)` index): the items having the tag, looked up rather than scanned.
            clauses.append("id IN (SELECT item_id FROM item_tags WHERE tag = ?)")
            arguments += [tag]
        }
        if let played {
            clauses.append("\(played ? "" : "NOT ")EXISTS (SELECT 1 FROM item_consumption c WHERE c.item_id = items.id)")
        }
        if let urlContains {
            clauses.append("instr(url, ?) > 0")
            arguments += [urlContains]
        }
        if let locked {
            clauses.append("locked = ?")
            arguments += [locked]
        }
        if let text {
            clauses.append("(instr(lower(COALESCE(title, '')), lower(?)) > 0 OR instr(lower(url), lower(?)) > 0)")
            arguments += [text, text]
        }
        if let ids {
            clauses.append(ids.isEmpty ? "0" : "id IN (\(ids.map { _ in "?" }.joined(separator: ", ")))")
            for id in ids { arguments += [id] }
        }
        return (clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND "), arguments)
    }

    var order: String {
        let direction = descending ? " DESC" : ""
        return "ORDER BY " + (sort.keys + ["id"]).map { $0 + direction }.joined(separator: ", ")
    }

    /// The cursor's condition: rows after its item in this order (the sort keys, then the id, as one row value).
    func cursorCondition(_ cursor: Cursor) -> (sql: String, arguments: StatementArguments) {
        let keys = sort.keys + ["id"]
        let sql = "(\(keys.joined(separator: ", "))) \(descending ? "<" : ">") (\(keys.map { _ in "?" }.joined(separator: ", ")))"
        return (sql, StatementArguments(cursor.values + [cursor.id.databaseValue]))
    }
}

/// One page of a listing.
package struct ItemPage: Sendable {
    package var items: [DownloadItem]
    /// How many items the filters select in all (whatever the page).
    package var total: Int
    /// With a `limit`, when more items follow this page: the cursor of its last item (`after=` for the next page).
    package var nextCursor: ItemQuery.Cursor?
}

extension ItemStore {
    /// One page of the items `query` selects, and how many it selects in all; one read transaction.
    package func list(_ query: ItemQuery) throws(DownloadError) -> (items: [DownloadItem], total: Int) {
        let page = try self.page(query)
        return (page.items, page.total)
    }

    /// One page of the items `query` selects (after its cursor, or its offset), how many it selects in all, and the
    /// cursor of the next page; one read transaction.
    package func page(_ query: ItemQuery) throws(DownloadError) -> ItemPage {
        try read { db in
            let (condition, arguments) = query.condition()
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM items \(condition)", arguments: arguments) ?? 0
            var pageCondition = condition
            var pageArguments = arguments
            if let cursor = query.after {
                let (sql, cursorArguments) = query.cursorCondition(cursor)
                pageCondition += (condition.isEmpty ? "WHERE " : " AND ") + sql
                pageArguments += cursorArguments
            }
            // The sort keys of each row come along, for the next page's cursor; one row more tells whether one follows.
            let keys = query.sort.keys.enumerated().map { ", \($1) AS sort_key_\($0)" }.joined()
            var sql = "SELECT *\(keys) FROM items \(pageCondition) \(query.order)"
            if query.limit != nil || query.offset > 0 {
                sql += " LIMIT ? OFFSET ?"
                pageArguments += [query.limit.map { $0 + 1 } ?? -1, query.offset]
            }
            var rows = try Row.fetchAll(db, sql: sql, arguments: pageArguments)
            var next: ItemQuery.Cursor?
            if let limit = query.limit, rows.count > limit {
                rows.removeLast(rows.count - limit)
                if let last = rows.last {
                    next = ItemQuery.Cursor(
                        sort: query.sort, descending: query.descending,
                        values: query.sort.keys.indices.map { last["sort_key_\($0)"] as DatabaseValue }, id: last["id"])
                }
            }
            return ItemPage(items: try rows.map(self.decode), total: total, nextCursor: next)
        }
    }

    /// The ids `query` selects (all of them, whatever its page), for batch actions.
    package func ids(_ query: ItemQuery) throws(DownloadError) -> [String] {
        try read { db in
            let (condition, arguments) = query.condition()
            return try String.fetchAll(db, sql: "SELECT id FROM items \(condition) \(query.order)", arguments: arguments)
        }
    }
}

extension ItemStore {
    /// The tags in use and how many items carry each, by tag (`GET /api/v1/tags`, the PCD's categories).
    package func tagCounts() throws(DownloadError) -> [(tag: String, items: Int)] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT tag, COUNT(*) AS n FROM item_tags GROUP BY tag ORDER BY tag").map { ($0["tag"], $0["n"]) }
        }
    }
}
