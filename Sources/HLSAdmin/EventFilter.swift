/// Which events one `/events` subscriber wants (`?item=ID&type=state,progress`): the PCD's filtered listeners,
/// THEOplayer's per-task listeners. Empty sets: every item, every type.
struct EventFilter: Sendable, Hashable {
    /// The event types a subscriber may name.
    static let types: Set<String> = ["state", "progress", "evicted", "removed", "lock", "played", "policy", "server"]

    var items: Set<String> = []
    var types: Set<String> = []

    /// The filter of the query parameters `item` and `type` (comma-separated or repeated).
    static func parse(_ query: [String: String]) throws(AdminError) -> EventFilter {
        var filter = EventFilter()
        let split = { (text: String) in Set(AdminAPI.split(text)) }
        if let text = query["item"] {
            filter.items = split(text)
            guard !filter.items.isEmpty else { throw .badRequest("item=: expected one item id or several, comma-separated") }
        }
        if let text = query["type"] {
            filter.types = split(text)
            if let unknown = filter.types.sorted().first(where: { !Self.types.contains($0) }) {
                throw .badRequest("type=\(unknown): expected one of \(Self.types.sorted().joined(separator: ", "))")
            }
            guard !filter.types.isEmpty else { throw .badRequest("type=: expected one event type or several") }
        }
        if let unknown = query.keys.sorted().first(where: { !["item", "type", "access_token"].contains($0) }) {
            throw .badRequest("unknown parameter \(unknown) (expected item, type)")
        }
        return filter
    }

    func accepts(_ event: AdminEvent) -> Bool {
        (items.isEmpty || items.contains(event.id) || event.id.isEmpty) && (types.isEmpty || types.contains(event.type))
    }
}
