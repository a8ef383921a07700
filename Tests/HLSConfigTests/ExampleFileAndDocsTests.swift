import Foundation
import Testing

@testable import HLSConfig

/// Config/hlscache.yaml and docs/configuration.md stay in step with the settings hlscache knows.
@Suite struct ExampleFileAndDocsTests {
    /// The shipped file parses, sets every key (`~` counts: "use the default"), and its values are the defaults.
    @Test func exampleFileHasEveryKeyWithItsDefault() throws {
        let path = ConfigFixture.exampleFile
        let loaded = try SettingsLoader.load(configFile: path, environment: [:])
        #expect(loaded.settings == HLSCacheSettings())
        let file = try ConfigFile.read(path)
        for key in SettingCatalog.all {
            #expect(loaded.sources[key.name] == path || file.nullKeys.contains(key.name), "Config/hlscache.yaml lacks \(key.name)")
        }
        #expect(file.origins.isEmpty)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("\norigins:"))
    }

    /// docs/configuration.md has one row per key with its environment variable, flag and default, and no row
    /// for a key hlscache does not know.
    @Test func docsListEveryKeyAndNoOther() throws {
        let docs = try String(contentsOfFile: ConfigFixture.docs, encoding: .utf8)
        var rows: [String: [String]] = [:]
        for line in docs.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5 else { continue }
            rows[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = Array(cells)
        }
        let defaults = HLSCacheSettings()
        let known = Set(SettingCatalog.all.map(\.name)).union([
            SettingCatalog.originsKey + ".<host>.headers", SettingCatalog.originsKey + ".<host>.cookies",
        ])
        #expect(
            Set(rows.keys) == known,
            "docs/configuration.md rows differ: missing \(known.subtracting(rows.keys).sorted()), extra \(Set(rows.keys).subtracting(known).sorted())"
        )
        for key in SettingCatalog.all {
            guard let row = rows[key.name] else { continue }
            #expect(row[1] == "`\(key.environmentName)`", "\(key.name): env column \(row[1])")
            #expect(row[2] == (key.flag.map { "`\($0)`" } ?? "—"), "\(key.name): flag column \(row[2])")
            #expect(row[3] == "`\(key.fileValue(defaults))`", "\(key.name): default column \(row[3]) vs \(key.fileValue(defaults))")
        }
    }
}
