import HLSCacheCore
import Testing

@Suite struct BoundedLRUTests {
    @Test func dropsTheLeastRecentlyUsedPastTheCount() {
        var table = BoundedLRU<String, Int>(maxCount: 3)
        table.setValue(1, forKey: "a")
        table.setValue(2, forKey: "b")
        table.setValue(3, forKey: "c")
        let touched = table.value(forKey: "a")  // a is now the most recent
        #expect(touched == 1)
        table.setValue(4, forKey: "d")  // b goes
        #expect(table.count == 3)
        #expect(table.peekValue(forKey: "b") == nil)
        #expect(table.keysByRecency == ["d", "a", "c"])
        #expect(table.peekValue(forKey: "c") == 3)  // peeking does not touch
        table.setValue(5, forKey: "e")
        #expect(table.keysByRecency == ["e", "d", "a"])
    }

    @Test func dropsTheLeastRecentlyUsedPastTheCost() {
        var table = BoundedLRU<String, String>(maxCount: 100, maxCost: 10)
        var kept = table.setValue("x", forKey: "a", cost: 4)
        kept = kept && table.setValue("y", forKey: "b", cost: 4)
        #expect(kept && table.totalCost == 8)
        kept = table.setValue("z", forKey: "c", cost: 4)  // a goes
        #expect(kept)
        #expect(table.keysByRecency == ["c", "b"])
        #expect(table.totalCost == 8)
        // Replacing a value counts its new cost, not both.
        kept = table.setValue("y2", forKey: "b", cost: 6)
        #expect(kept)
        #expect(table.keysByRecency == ["b", "c"])
        #expect(table.totalCost == 10)
        kept = table.setValue("w", forKey: "d", cost: 1)  // c goes (4), b stays
        #expect(kept)
        #expect(table.keysByRecency == ["d", "b"])
        #expect(table.totalCost == 7)
    }

    @Test func aValueLargerThanTheWholeBoundIsNeverKeptAndTakesItsOlderValueAlong() {
        var table = BoundedLRU<String, Int>(maxCount: 10, maxCost: 100)
        table.setValue(1, forKey: "small", cost: 10)
        table.setValue(2, forKey: "big", cost: 50)
        let keptBig = table.setValue(3, forKey: "big", cost: 101)
        #expect(!keptBig)
        #expect(table.peekValue(forKey: "big") == nil)
        #expect(table.peekValue(forKey: "small") == 1)  // nothing else was dropped to try
        #expect(table.totalCost == 10)

        var disabled = BoundedLRU<String, Int>(maxCount: 0)
        let keptAny = disabled.setValue(1, forKey: "a")
        #expect(!keptAny)
        #expect(disabled.isEmpty)
    }

    @Test func modifyingInPlaceKeepsTheOrderAndRemovalFreesTheCost() {
        var table = BoundedLRU<String, [Int]>(maxCount: 3, maxCost: 30)
        table.setValue([1], forKey: "a", cost: 10)
        table.setValue([2], forKey: "b", cost: 10)
        let count = table.modifyValue(forKey: "a") {
            $0.append(9); return $0.count
        }
        #expect(count == 2)
        let missing = table.modifyValue(forKey: "missing") { $0.count }
        #expect(missing == nil)
        #expect(table.keysByRecency == ["b", "a"])
        #expect(table.peekValue(forKey: "a") == [1, 9])
        let removed = table.removeValue(forKey: "b")
        #expect(removed == [2])
        #expect(table.totalCost == 10)
        let least = table.removeLeastRecent()
        #expect(least?.key == "a")
        #expect(table.isEmpty && table.totalCost == 0)
        let none = table.removeLeastRecent()
        #expect(none == nil)
    }

    @Test func removeAllWhereSweepsAndKeepsTheRestInOrder() {
        var table = BoundedLRU<Int, Int>(maxCount: 100)
        for key in 0..<10 { table.setValue(key * 10, forKey: key, cost: 1) }
        table.removeAll { key, _ in key % 2 == 0 }
        #expect(table.keysByRecency == [9, 7, 5, 3, 1])
        #expect(table.totalCost == 5)
        table.setValue(0, forKey: 100)
        #expect(table.keysByRecency.first == 100)
        table.removeAll()
        #expect(table.isEmpty && table.keysByRecency.isEmpty && table.totalCost == 0)
        table.setValue(1, forKey: 1)
        #expect(table.keysByRecency == [1])
    }

    /// Thousands of random operations against a plain model (an array in recency order): the same entries, order and
    /// cost after every step.
    @Test func behavesLikeTheModelUnderRandomOperations() {
        struct Model {
            var entries: [(key: Int, value: Int, cost: Int)] = []  // most recent first
            let maxCount: Int
            let maxCost: Int
            var cost: Int { entries.reduce(0) { $0 + $1.cost } }
            mutating func get(_ key: Int) -> Int? {
                guard let index = entries.firstIndex(where: { $0.key == key }) else { return nil }
                let entry = entries.remove(at: index)
                entries.insert(entry, at: 0)
                return entry.value
            }
            mutating func set(_ value: Int, _ key: Int, cost: Int) {
                entries.removeAll { $0.key == key }
                guard cost <= maxCost, maxCount > 0 else { return }
                entries.insert((key, value, cost), at: 0)
                while entries.count > maxCount || self.cost > maxCost { entries.removeLast() }
            }
            mutating func remove(_ key: Int) -> Int? {
                guard let index = entries.firstIndex(where: { $0.key == key }) else { return nil }
                return entries.remove(at: index).value
            }
        }
        var generator = SplitMix(seed: 0x5eed)
        for (maxCount, maxCost) in [(1, Int.max), (7, Int.max), (16, 40), (64, 100), (5, 3)] {
            var table = BoundedLRU<Int, Int>(maxCount: maxCount, maxCost: maxCost)
            var model = Model(maxCount: maxCount, maxCost: maxCost)
            for step in 0..<5_000 {
                let key = Int(generator.next() % 24)
                switch generator.next() % 10 {
                case 0...3:
                    let (got, expected) = (table.value(forKey: key), model.get(key))
                    #expect(got == expected, "step \(step)")
                case 4...7:
                    let cost = Int(generator.next() % 12)
                    table.setValue(step, forKey: key, cost: cost)
                    model.set(step, key, cost: cost)
                case 8:
                    let (got, expected) = (table.removeValue(forKey: key), model.remove(key))
                    #expect(got == expected, "step \(step)")
                default:
                    let limit = key
                    table.removeAll { _, value in value % 24 < limit }
                    model.entries.removeAll { $0.value % 24 < limit }
                }
                #expect(table.keysByRecency == model.entries.map(\.key), "step \(step), bounds \(maxCount)/\(maxCost)")
                #expect(table.totalCost == model.cost)
                #expect(table.count == model.entries.count)
            }
        }
    }
}

/// A small deterministic generator (the test must fail the same way every time).
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
