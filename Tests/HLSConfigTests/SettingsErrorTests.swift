import Foundation
import Testing

@testable import HLSConfig

/// Every kind of bad configuration is one line naming the key (or the line) and the source.
@Suite struct SettingsErrorTests {
    private func error(file yaml: String? = nil, environment: [String: String] = [:], flags: CommandLineSettings = CommandLineSettings())
        throws -> (message: String, file: String?)
    {
        let fixture = try ConfigFixture()
        let file = try yaml.map { try fixture.write($0) }
        do {
            _ = try SettingsLoader.load(configFile: file, environment: environment, commandLine: flags)
        } catch {
            #expect(!error.message.contains("\n"), "not one line: \(error.message)")
            return (error.message, file)
        }
        Issue.record("no error")
        return ("", file)
    }

    @Test func badSizeNamesKeyValueAndFile() throws {
        let (message, file) = try error(file: "cache:\n  maxSize: ten\n")
        #expect(message == "cache.maxSize = \"ten\" in \(file!): not a size (try 10GiB, 500MiB or 4096)")
    }

    @Test func badDurationFromTheEnvironmentNamesTheVariable() throws {
        let (message, _) = try error(environment: ["HLSCACHE_LIMITS_IDLE_TIMEOUT": "soon"])
        #expect(
            message == "limits.idleTimeout = \"soon\" in env HLSCACHE_LIMITS_IDLE_TIMEOUT: not a duration (try 500ms, 10s, 5m, 24h or 7d)")
    }

    /// `live.rewindWindow`: a duration up to 7d, or off; from the file or `HLSCACHE_LIVE_REWIND_WINDOW`.
    @Test func rewindWindowIsADurationOrOff() throws {
        let (message, file) = try error(file: "live:\n  rewindWindow: forever\n")
        #expect(message == "live.rewindWindow = \"forever\" in \(file!): not a duration (try 30m, 2h or 1d), or off")
        let tooLong = try error(environment: ["HLSCACHE_LIVE_REWIND_WINDOW": "8d"]).message
        #expect(tooLong == "live.rewindWindow = \"8d\" in env HLSCACHE_LIVE_REWIND_WINDOW: at most 7d")
        let fixture = try ConfigFixture()
        let two = try SettingsLoader.load(
            configFile: try fixture.write("live:\n  rewindWindow: 2h\n"), environment: [:], commandLine: CommandLineSettings())
        #expect(two.settings.proxyConfiguration(environment: [:]).liveRewindWindow == 7200)
        let off = try SettingsLoader.load(
            configFile: nil, environment: ["HLSCACHE_LIVE_REWIND_WINDOW": "off"], commandLine: CommandLineSettings())
        #expect(off.settings.proxyConfiguration(environment: [:]).liveRewindWindow == 0)
        #expect(
            try SettingsLoader.load(configFile: nil, environment: [:], commandLine: CommandLineSettings()).settings.liveRewindWindow
                == .zero)
    }

    /// `cache.memorySize` is auto or a size.
    @Test func memorySizeIsASizeOrAuto() throws {
        let word = try error(environment: ["HLSCACHE_CACHE_MEMORY_SIZE": "lots"]).message
        #expect(word == "cache.memorySize = \"lots\" in env HLSCACHE_CACHE_MEMORY_SIZE: not a size (try 256MiB, 1GiB or 0), or auto")
        let sized = try SettingsLoader.load(configFile: nil, environment: ["HLSCACHE_CACHE_MEMORY_SIZE": "256MiB"])
        #expect(sized.settings.memoryCacheBytes == 256 << 20)
        let off = try SettingsLoader.load(configFile: nil, environment: ["HLSCACHE_CACHE_MEMORY_SIZE": "0"])
        #expect(off.settings.memoryCacheBytes == 0)
        let auto = try SettingsLoader.load(configFile: nil, environment: ["HLSCACHE_CACHE_MEMORY_SIZE": " AUTO "])
        #expect(auto.settings.memoryCacheBytes == nil)
        let blanks = try SettingsLoader.load(configFile: nil, environment: ["HLSCACHE_CACHE_MEMORY_SIZE": " 64MiB "])
        #expect(blanks.settings.memoryCacheBytes == 64 << 20)
        #expect(SettingCatalog.key("cache.memorySize")?.fileValue(sized.settings) == "256MiB")
        #expect(SettingCatalog.key("cache.memorySize")?.fileValue(auto.settings) == "auto")
    }

    /// `http.eventLoops` is auto or a count from 1 to 1024.
    @Test func eventLoopsIsACountOrAuto() throws {
        let none = try error(environment: ["HLSCACHE_HTTP_EVENT_LOOPS": "0"]).message
        #expect(none == "http.eventLoops = \"0\" in env HLSCACHE_HTTP_EVENT_LOOPS: expected auto or a number of event loops from 1 to 1024")
        let (word, file) = try error(file: "http:\n  eventLoops: many\n")
        #expect(word == "http.eventLoops = \"many\" in \(file!): expected auto or a number of event loops from 1 to 1024")
        let fixture = try ConfigFixture()
        let four = try SettingsLoader.load(
            configFile: try fixture.write("http:\n  eventLoops: 4\n"), environment: [:], commandLine: CommandLineSettings())
        #expect(four.settings.eventLoops == 4)
        #expect(try SettingsLoader.load(configFile: nil, environment: ["HLSCACHE_HTTP_EVENT_LOOPS": " 2 "]).settings.eventLoops == 2)
        let auto = try SettingsLoader.load(
            configFile: nil, environment: ["HLSCACHE_HTTP_EVENT_LOOPS": "auto"], commandLine: CommandLineSettings())
        #expect(auto.settings.eventLoops == nil)
        #expect(try SettingsLoader.load(configFile: nil, environment: [:], commandLine: CommandLineSettings()).settings.eventLoops == nil)
    }

    @Test func badFlagNamesTheFlag() throws {
        var flags = CommandLineSettings()
        flags.set("listen", "nonsense")
        let (message, _) = try error(flags: flags)
        #expect(message == "listen = \"nonsense\" in --listen: expected host:port, e.g. 127.0.0.1:8080")
    }

    /// A too-short `api.token` is a config error like any other: it names where the value came from, and the
    /// value is masked (it is a secret).
    @Test func aShortAPITokenNamesItsSourceAndIsMasked() throws {
        let fromEnvironment = try error(environment: ["HLSCACHE_API_TOKEN": "short"]).message
        #expect(fromEnvironment == "api.token = \"********\" in env HLSCACHE_API_TOKEN: expected at least 16 characters without spaces")
        let (fromFile, file) = try error(file: "api:\n  token: short\n")
        #expect(fromFile == "api.token = \"********\" in \(file!): expected at least 16 characters without spaces")
        var flags = CommandLineSettings()
        flags.set("api.token", "has a space in it, long enough")
        let fromFlag = try error(flags: flags).message
        #expect(fromFlag == "api.token = \"********\" in --api-token: expected at least 16 characters without spaces")
        let accepted = try SettingsLoader.load(
            configFile: nil, environment: ["HLSCACHE_API_TOKEN": "0123456789abcdef"], commandLine: CommandLineSettings())
        #expect(accepted.settings.apiToken == "0123456789abcdef")
    }

    @Test func anOriginCAFileMustBeAReadablePEMFile() throws {
        let fixture = try ConfigFixture()
        let missing = try error(environment: ["HLSCACHE_ORIGIN_CA_FILE": "/nonexistent/ca.pem"]).message
        #expect(missing == "origin.caFile = \"/nonexistent/ca.pem\" in env HLSCACHE_ORIGIN_CA_FILE: cannot read /nonexistent/ca.pem")
        let text = try fixture.write("not a certificate\n", name: "not.pem")
        var flags = CommandLineSettings()
        flags.set("origin.caFile", text)
        let notPEM = try error(flags: flags).message
        #expect(notPEM == "origin.caFile = \"\(text)\" in --origin-ca: \(text) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        let pem = try fixture.write("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", name: "ca.pem")
        let settings = try SettingsLoader.load(
            configFile: nil, environment: ["HLSCACHE_ORIGIN_CA_FILE": pem], commandLine: CommandLineSettings())
        #expect(settings.settings.originConfiguration().extraTrustRootsFile == pem)
        let none = try SettingsLoader.load(
            configFile: nil, environment: ["HLSCACHE_ORIGIN_CA_FILE": "~"], commandLine: CommandLineSettings())
        #expect(none.settings.originConfiguration().extraTrustRootsFile == nil)
    }

    /// `origin.proxy` is `[http://][USER:PASSWORD@]HOST:PORT`; the credentials become `Basic` proxy authorization
    /// (percent-decoded), and the password never shows in an error or in `--print-config`.
    @Test func anUpstreamProxyTakesCredentialsAndMasksThePassword() throws {
        let accepted: [(String, UpstreamProxyAddress)] = [
            ("127.0.0.1:3128", UpstreamProxyAddress(host: "127.0.0.1", port: 3128)),
            ("http://proxy.internal:8080/", UpstreamProxyAddress(host: "proxy.internal", port: 8080)),
            ("HTTP://[::1]:3128", UpstreamProxyAddress(host: "::1", port: 3128)),
            ("alice:pw@proxy:3128", UpstreamProxyAddress(host: "proxy", port: 3128, username: "alice", password: "pw")),
            ("http://al%40ce:p%3Aw%40d@proxy:1", UpstreamProxyAddress(host: "proxy", port: 1, username: "al@ce", password: "p:w@d")),
            ("token@proxy:1", UpstreamProxyAddress(host: "proxy", port: 1, username: "token", password: "")),
            ("socks5://127.0.0.1:1080", UpstreamProxyAddress(.socks5, host: "127.0.0.1", port: 1080)),
            ("SOCKS5H://tor.internal:9050/", UpstreamProxyAddress(.socks5, host: "tor.internal", port: 9050)),
        ]
        for (text, address) in accepted {
            #expect(try UpstreamProxyAddress(parsing: text) == address, "\(text)")
        }
        let refused: [(String, String)] = [
            ("https://a:secret@proxy:443", "https:// proxies are not supported"),
            ("socks4://proxy:1080", "socks4:// proxies are not supported"),
            ("socks5://a:secret@proxy:1080", "a SOCKS proxy takes no user or password"),
            (":secret@proxy:1", "an empty proxy user"),
            ("a:secret@proxy", "expected [http://][USER:PASSWORD@]HOST:PORT or socks5://HOST:PORT"),
            ("a:sec%zzret@proxy:1", "a bad %-escape"),
            ("proxy:99999", "expected [http://][USER:PASSWORD@]HOST:PORT"),
            ("http://proxy:1/path", "expected [http://][USER:PASSWORD@]HOST:PORT"),
            ("a:sec ret@proxy:1", "without spaces"),
        ]
        for (text, problem) in refused {
            let message = try error(environment: ["HLSCACHE_ORIGIN_PROXY": text]).message
            #expect(message.hasPrefix("origin.proxy = \""), "\(text): \(message)")
            #expect(message.contains(problem), "\(text): \(message)")
            #expect(!message.contains("secret") && !message.contains("sec%zzret") && !message.contains("sec ret"), "\(text): \(message)")
        }
        #expect(UpstreamProxyAddress.masked("http://alice:s3cret@proxy:1") == "http://alice:********@proxy:1")
        #expect(UpstreamProxyAddress.masked("t0ken@proxy:1") == "********@proxy:1")
        #expect(UpstreamProxyAddress.masked("proxy:1") == "proxy:1")

        var flags = CommandLineSettings()
        flags.set("origin.proxy", "http://alice:p%3As3cret@127.0.0.1:3128")
        let loaded = try SettingsLoader.load(configFile: nil, environment: [:], commandLine: flags)
        let proxy = try #require(loaded.settings.originConfiguration().proxy)
        #expect(proxy.host == "127.0.0.1" && proxy.port == 3128)
        #expect(proxy.authorization?.headerValue == "Basic " + Data("alice:p:s3cret".utf8).base64EncodedString())
        let printed = loaded.printableConfiguration(environment: [:])
        #expect(printed.contains("origin.proxy = http://alice:********@127.0.0.1:3128  # --upstream-proxy"), "\(printed)")
        #expect(!printed.contains("s3cret"))
        let plain = try SettingsLoader.load(configFile: nil, environment: ["HLSCACHE_ORIGIN_PROXY": "127.0.0.1:3128"])
        #expect(plain.settings.originConfiguration().proxy?.authorization == nil)
        let socks = try SettingsLoader.load(configFile: nil, environment: ["HLSCACHE_ORIGIN_PROXY": "socks5://127.0.0.1:1080"])
        #expect(socks.settings.originConfiguration().proxy == .socksServer(host: "127.0.0.1", port: 1080))
    }

    @Test func unknownKeysAreRefusedWithASuggestion() throws {
        let (typo, file) = try error(file: "cache:\n  maxsize: 10GiB\n")
        #expect(typo == "cache.maxsize in \(file!) (line 2): unknown key (did you mean cache.maxSize?)")
        let (top, _) = try error(file: "listen: 127.0.0.1:8080\nbogus: 1\n")
        #expect(top.hasPrefix("bogus in ") && top.contains("unknown key"))
        let (origin, _) = try error(file: "origins:\n  cdn.example.com:\n    header:\n      A: b\n")
        #expect(origin.hasPrefix("origins.cdn.example.com.header in ") && origin.contains("expected headers or cookies"))
    }

    @Test func wrongShapes() throws {
        let (list, _) = try error(file: "listen: [a, b]\n")
        #expect(list.hasPrefix("listen in ") && list.contains("expected a single value"))
        let (section, _) = try error(file: "cache: 10GiB\n")
        #expect(section.hasPrefix("cache in ") && section.contains("expected keys under it"))
        let (mapping, _) = try error(file: "log:\n  level:\n    a: b\n")
        #expect(mapping.hasPrefix("log.level in ") && mapping.contains("expected a value, not a mapping"))
        let (cidr, _) = try error(file: "keys:\n  allow: [10.0.0.0/8, nonsense]\n")
        #expect(cidr.hasPrefix("keys.allow in ") && cidr.contains("\"nonsense\": not a network"))
        let (range, _) = try error(file: "prefetch:\n  segments: 1000\n")
        #expect(range.contains("must be between 0 and 64"))
        let (header, _) = try error(file: "origins:\n  cdn.example.com:\n    headers:\n      \"Bad Name\": x\n")
        #expect(header.contains("not a valid header name"))
    }

    @Test func unreadableFiles() throws {
        let fixture = try ConfigFixture()
        let missing = fixture.directory.appendingPathComponent("missing.yaml").path
        #expect(throws: SettingsError.self) { try SettingsLoader.load(configFile: missing, environment: [:]) }
        do {
            _ = try SettingsLoader.load(configFile: missing, environment: [:])
        } catch {
            #expect(error.message == "cannot read \(missing): no such file")
        }
        do {
            _ = try SettingsLoader.load(configFile: fixture.directory.path, environment: [:])
            Issue.record("a directory was read as a config file")
        } catch {
            #expect(error.message == "cannot read \(fixture.directory.path): it is a directory")
        }
        // Through HLSCACHE_CONFIG too.
        do {
            _ = try SettingsLoader.load(configFile: nil, environment: ["HLSCACHE_CONFIG": missing])
            Issue.record("a missing HLSCACHE_CONFIG file was ignored")
        } catch {
            #expect(error.message.contains(missing))
        }
    }

    @Test func yamlSyntaxErrorsNameTheLine() throws {
        let (message, file) = try error(file: "listen: 127.0.0.1:8080\ncache:\n  maxSize: 10GiB\n    dir: x\n")
        #expect(message.hasPrefix("\(file!): not valid YAML: line 4"), "\(message)")
        let (unclosed, _) = try error(file: "cache: [a, b\n")
        #expect(unclosed.contains("not valid YAML: line "))
        let (scalar, _) = try error(file: "just a string\n")
        #expect(scalar.contains("expected keys such as `listen:` at the top level"))
    }

    @Test func anEmptyFileMeansDefaults() throws {
        let fixture = try ConfigFixture()
        let empty = try SettingsLoader.load(configFile: try fixture.write(""), environment: [:])
        #expect(empty.settings == HLSCacheSettings())
        let comments = try SettingsLoader.load(configFile: try fixture.write("# nothing here\n"), environment: [:])
        #expect(comments.settings == HLSCacheSettings())
    }
}
