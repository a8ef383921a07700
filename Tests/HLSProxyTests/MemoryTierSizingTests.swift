import Foundation
import Testing

@testable import HLSProxy

/// `cache.memorySize: auto` (``MemoryTierSizing``): a 64th of the usable memory, within 64 MiB and 1 GiB, never over
/// an eighth of it; a container's limit counts when lower than the machine.
@Suite struct MemoryTierSizingTests {
    private static let mebibyte = 1 << 20
    private static let gibibyte = 1 << 30

    @Test func theDefaultFollowsTheMemoryWithinItsBounds() {
        #expect(MemoryTierSizing.defaultBytes(physicalMemory: 24 * Self.gibibyte, limit: nil) == 384 * Self.mebibyte)
        #expect(MemoryTierSizing.defaultBytes(physicalMemory: 2 * Self.gibibyte, limit: nil) == 64 * Self.mebibyte)
        #expect(MemoryTierSizing.defaultBytes(physicalMemory: 256 * Self.gibibyte, limit: nil) == Self.gibibyte)
        // A container limited to 256 MiB on a large machine: an eighth of its limit.
        #expect(MemoryTierSizing.defaultBytes(physicalMemory: 256 * Self.gibibyte, limit: 256 * Self.mebibyte) == 32 * Self.mebibyte)
        // A limit above the machine's memory changes nothing.
        #expect(MemoryTierSizing.defaultBytes(physicalMemory: 8 * Self.gibibyte, limit: 64 * Self.gibibyte) == 128 * Self.mebibyte)
    }

    @Test func theControlGroupLimitIsReadFromV2ThenV1() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cgroup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("memory"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(MemoryTierSizing.controlGroupLimit(root: root.path) == nil)
        try "9223372036854771712\n".write(
            to: root.appendingPathComponent("memory/memory.limit_in_bytes"), atomically: true, encoding: .utf8)
        #expect(MemoryTierSizing.controlGroupLimit(root: root.path) == nil, "v1's 'unlimited' is no limit")
        try "536870912\n".write(to: root.appendingPathComponent("memory/memory.limit_in_bytes"), atomically: true, encoding: .utf8)
        #expect(MemoryTierSizing.controlGroupLimit(root: root.path) == 512 * Self.mebibyte)
        try "max\n".write(to: root.appendingPathComponent("memory.max"), atomically: true, encoding: .utf8)
        #expect(MemoryTierSizing.controlGroupLimit(root: root.path) == nil, "v2 says max: no limit, whatever v1 says")
        try "268435456\n".write(to: root.appendingPathComponent("memory.max"), atomically: true, encoding: .utf8)
        #expect(MemoryTierSizing.controlGroupLimit(root: root.path) == 256 * Self.mebibyte)
    }
}
