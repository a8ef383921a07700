/// A map bounded by a number of entries and by a total cost (bytes, usually): past either bound the least recently
/// used entries go, one at a time, never the whole table. Every in-memory table of the proxy is one (target memos,
/// playlist side tables, the memory tier), so when a table is full the entries in use stay and the forgotten ones
/// leave — a table that wiped itself when full silently forgot what a playing stream still needed.
///
/// A value type with no lock: keep it in a `Mutex` or `NIOLockedValueBox`. Lookups, insertions and removals are
/// O(1) (a dictionary of slots and a doubly linked recency list kept in an array of its own: moving an entry in
/// the order touches two integers per neighbour, never a copy of an entry's key or value). Inlinable, so that each table is
/// specialised for its key and value types where it is used (the proxy looks several up per request) — and `public`
/// for that: the bodies of `package` inlinable code are not made available to other modules by this toolchain, and
/// every call from them stayed a generic call with a metadata lookup (HLSCacheCore is no library product, so nothing
/// outside the package sees it).
public struct BoundedLRU<Key: Hashable, Value> {
    @usableFromInline
    struct Node {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        @usableFromInline var cost: Int

        @inlinable
        init(key: Key, value: Value, cost: Int) {
            self.key = key
            self.value = value
            self.cost = cost
        }
    }

    /// A slot's place in the recency list, apart from its node: relinking reads and writes these alone (through an
    /// optional node, reading one link copied the whole node, its key and value retained and released).
    @usableFromInline
    struct Links: Sendable {
        /// Towards the most recent entry; -1 at the most recent.
        @usableFromInline var newer: Int
        /// Towards the least recent entry; -1 at the least recent.
        @usableFromInline var older: Int

        @inlinable
        init(newer: Int, older: Int) {
            self.newer = newer
            self.older = older
        }
    }

    /// The most entries kept.
    public let maxCount: Int
    /// The largest total cost kept; an entry whose cost alone is larger is never kept.
    public let maxCost: Int
    /// The sum of the costs of the entries.
    @inlinable public var totalCost: Int { costSum }
    @usableFromInline var costSum = 0

    @usableFromInline var slots: [Key: Int] = [:]
    @usableFromInline var nodes: [Node?] = []
    /// The recency links of each slot of ``nodes`` (as many).
    @usableFromInline var links: [Links] = []
    @usableFromInline var freeSlots: [Int] = []
    @usableFromInline var mostRecent = -1
    @usableFromInline var leastRecent = -1

    /// - Parameters:
    ///   - maxCount: the most entries kept (0: none).
    ///   - maxCost: the largest total cost kept (default: unbounded, the count alone bounds the table).
    @inlinable
    public init(maxCount: Int, maxCost: Int = .max) {
        precondition(maxCount >= 0 && maxCost >= 0, "bounds must not be negative")
        self.maxCount = maxCount
        self.maxCost = maxCost
    }

    @inlinable
    public var count: Int { slots.count }
    @inlinable
    public var isEmpty: Bool { slots.isEmpty }

    @inlinable
    public func contains(_ key: Key) -> Bool { slots[key] != nil }

    /// The value for `key`, made the most recently used.
    @inlinable
    public mutating func value(forKey key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        touch(slot)
        return nodes[slot]!.value
    }

    /// The value for `key`, leaving the recency order as it is.
    @inlinable
    public func peekValue(forKey key: Key) -> Value? {
        slots[key].map { nodes[$0]!.value }
    }

    /// Stores `value` for `key` as the most recently used entry, then drops least recently used entries until both
    /// bounds hold. A value whose cost alone exceeds ``maxCost`` (or any value when ``maxCount`` is 0) is not kept,
    /// and the key's earlier value goes too: a table never answers with a value older than one it refused.
    /// - Returns: whether the value was kept.
    @discardableResult
    @inlinable
    public mutating func setValue(_ value: Value, forKey key: Key, cost: Int = 0) -> Bool {
        precondition(cost >= 0, "cost must not be negative")
        guard cost <= maxCost, maxCount > 0 else {
            removeValue(forKey: key)
            return false
        }
        if let slot = slots[key] {
            costSum += cost - nodes[slot]!.cost
            nodes[slot]!.value = value
            nodes[slot]!.cost = cost
            touch(slot)
        } else {
            let node = Node(key: key, value: value, cost: cost)
            let link = Links(newer: -1, older: mostRecent)
            let slot: Int
            if let free = freeSlots.popLast() {
                slot = free
                nodes[slot] = node
                links[slot] = link
            } else {
                slot = nodes.count
                nodes.append(node)
                links.append(link)
            }
            if mostRecent >= 0 { links[mostRecent].newer = slot }
            mostRecent = slot
            if leastRecent < 0 { leastRecent = slot }
            slots[key] = slot
            costSum += cost
        }
        while slots.count > maxCount || costSum > maxCost {
            removeLeastRecent()
        }
        return true
    }

    /// Changes the value for `key` in place (its cost stays), without changing the recency order.
    /// - Returns: what `body` returned, or nil when there is no value for `key`.
    @discardableResult
    @inlinable
    public mutating func modifyValue<Result>(forKey key: Key, _ body: (inout Value) throws -> Result) rethrows -> Result? {
        guard let slot = slots[key] else { return nil }
        return try body(&nodes[slot]!.value)
    }

    /// Changes the value for `key` in place (its cost stays) and makes it the most recently used.
    /// - Returns: what `body` returned, or nil when there is no value for `key`.
    @discardableResult
    @inlinable
    public mutating func touchValue<Result>(forKey key: Key, _ body: (inout Value) throws -> Result) rethrows -> Result? {
        guard let slot = slots[key] else { return nil }
        touch(slot)
        return try body(&nodes[slot]!.value)
    }

    /// Removes the value for `key` and returns it.
    @discardableResult
    @inlinable
    public mutating func removeValue(forKey key: Key) -> Value? {
        guard let slot = slots.removeValue(forKey: key) else { return nil }
        return unlink(slot).value
    }

    /// Removes the least recently used entry and returns it.
    @discardableResult
    @inlinable
    public mutating func removeLeastRecent() -> (key: Key, value: Value)? {
        guard leastRecent >= 0 else { return nil }
        let slot = leastRecent
        slots[nodes[slot]!.key] = nil
        let node = unlink(slot)
        return (node.key, node.value)
    }

    /// Removes every entry for which `shouldRemove` is true (an expiry sweep).
    @inlinable
    public mutating func removeAll(where shouldRemove: (Key, Value) throws -> Bool) rethrows {
        var slot = leastRecent
        while slot >= 0 {
            let node = nodes[slot]!
            let next = links[slot].newer
            if try shouldRemove(node.key, node.value) {
                slots[node.key] = nil
                _ = unlink(slot)
            }
            slot = next
        }
    }

    @inlinable
    public mutating func removeAll() {
        slots.removeAll()
        nodes.removeAll()
        links.removeAll()
        freeSlots.removeAll()
        mostRecent = -1
        leastRecent = -1
        costSum = 0
    }

    /// The keys, the most recently used first.
    @inlinable
    public var keysByRecency: [Key] {
        var keys: [Key] = []
        keys.reserveCapacity(slots.count)
        var slot = mostRecent
        while slot >= 0 {
            keys.append(nodes[slot]!.key)
            slot = links[slot].older
        }
        return keys
    }

    /// Calls `body` with each entry (its key, value and cost), the least recently used first, until it returns false;
    /// the order is left as it is. What a caller weighs before it evicts (the memory tier's admission).
    @inlinable
    public func forEachLeastRecentFirst(_ body: (Key, Value, Int) throws -> Bool) rethrows {
        var slot = leastRecent
        while slot >= 0 {
            let node = nodes[slot]!
            guard try body(node.key, node.value, node.cost) else { return }
            slot = links[slot].newer
        }
    }

    // MARK: - The recency list

    @inlinable
    mutating func touch(_ slot: Int) {
        guard slot != mostRecent else { return }
        detach(slot)
        links[slot] = Links(newer: -1, older: mostRecent)
        if mostRecent >= 0 { links[mostRecent].newer = slot }
        mostRecent = slot
        if leastRecent < 0 { leastRecent = slot }
    }

    /// Takes `slot` out of the recency list (its own links are left as they were).
    @inlinable
    mutating func detach(_ slot: Int) {
        let link = links[slot]
        if link.newer >= 0 { links[link.newer].older = link.older } else { mostRecent = link.older }
        if link.older >= 0 { links[link.older].newer = link.newer } else { leastRecent = link.newer }
    }

    /// Frees `slot` (already gone from ``slots``) and returns what it held.
    @inlinable
    mutating func unlink(_ slot: Int) -> Node {
        detach(slot)
        let node = nodes[slot]!
        nodes[slot] = nil
        costSum -= node.cost
        if slots.isEmpty {
            // Empty again: let the storage go rather than keep the high-water mark of slots.
            nodes.removeAll()
            links.removeAll()
            freeSlots.removeAll()
        } else {
            freeSlots.append(slot)
        }
        return node
    }
}

extension BoundedLRU: Sendable where Key: Sendable, Value: Sendable {}

extension BoundedLRU.Node: Sendable where Key: Sendable, Value: Sendable {}
