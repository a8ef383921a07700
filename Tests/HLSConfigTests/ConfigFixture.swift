import Foundation

/// A temporary directory holding config files for one test; removed when the test ends.
final class ConfigFixture {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Writes `yaml` to `name` and returns its path.
    func write(_ yaml: String, name: String = "hlscache.yaml") throws -> String {
        let url = directory.appendingPathComponent(name)
        try Data(yaml.utf8).write(to: url)
        return url.path
    }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    static var exampleFile: String { repository.appendingPathComponent("Config/hlscache.yaml").path }
    static var docs: String { repository.appendingPathComponent("docs/configuration.md").path }
}
