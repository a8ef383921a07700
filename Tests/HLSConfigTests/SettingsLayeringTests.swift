import Foundation
import HLSCacheCore
import Testing

@testable import HLSConfig

/// Flag > `HLSCACHE_*` > YAML file > default, through the real swift-configuration providers and real files.
@Suite struct SettingsLayeringTests {
    @Test func eachLayerOverridesTheOneBelow() throws {
        let fixture = try ConfigFixture()
        let file = try fixture.write("cache:\n  maxSize: 1GiB\nlog:\n  level: debug\n")
        var flags = CommandLineSettings()
        flags.set("cache.maxSize", "3GiB")
        let environment = ["HLSCACHE_CACHE_MAX_SIZE": "2GiB", "HLSCACHE_LOG_LEVEL": "warning"]

        let all = try SettingsLoader.load(configFile: file, environment: environment, commandLine: flags)
        #expect(all.settings.maxCacheBytes == 3 << 30)
        #expect(all.sources["cache.maxSize"] == "--max-cache-size")
        #expect(all.settings.logLevel == "warning")
        #expect(all.sources["log.level"] == "env HLSCACHE_LOG_LEVEL")

        let noFlags = try SettingsLoader.load(configFile: file, environment: environment)
        #expect(noFlags.settings.maxCacheBytes == 2 << 30)
        #expect(noFlags.sources["cache.maxSize"] == "env HLSCACHE_CACHE_MAX_SIZE")

        let fileOnly = try SettingsLoader.load(configFile: file, environment: [:])
        #expect(fileOnly.settings.maxCacheBytes == 1 << 30)
        #expect(fileOnly.settings.logLevel == "debug")
        #expect(fileOnly.sources["cache.maxSize"] == file)

        let defaults = try SettingsLoader.load(configFile: nil, environment: [:])
        #expect(defaults.settings == HLSCacheSettings())
        #expect(defaults.sources["cache.maxSize"] == "default")
        #expect(defaults.configFile == nil)
    }

    @Test func configFileComesFromHLSCACHE_CONFIGUnlessGiven() throws {
        let fixture = try ConfigFixture()
        let first = try fixture.write("listen: 127.0.0.1:9001\n", name: "a.yaml")
        let second = try fixture.write("listen: 127.0.0.1:9002\n", name: "b.yaml")
        let fromEnvironment = try SettingsLoader.load(configFile: nil, environment: ["HLSCACHE_CONFIG": first])
        #expect(fromEnvironment.settings.listen.port == 9001)
        #expect(fromEnvironment.configFile == first)
        let explicit = try SettingsLoader.load(configFile: second, environment: ["HLSCACHE_CONFIG": first])
        #expect(explicit.settings.listen.port == 9002)
    }

    /// Every key is read from the environment variable its documentation names, by swift-configuration's
    /// `EnvironmentVariablesProvider` (camelCase split, dots to `_`, `HLSCACHE_` prefix).
    @Test func everyKeyIsReadFromItsEnvironmentVariable() throws {
        let samples: [String: String] = [
            "listen": "127.0.0.1:9999", "cache.dir": "/tmp/somewhere", "api.token": "secret-token-0123456789",
            "origin.proxy": "127.0.0.1:3128",
            "origin.userAgent": "test-agent", "downloads.rateLimit": "1MiB", "cache.volatileQueryParameters": "sig, exp",
            "origin.allowedHosts": "a.example,b.example", "keys.allow": "10.0.0.0/8", "api.allow": "192.168.0.0/16,10.1.0.0/16",
            "keys.autoRenewBefore": "30m", "keys.ttl": "none", "log.format": "json",
            "http.allowedWebOrigins": "loopback, https://player.example",
            "metrics.enabled": "false", "origin.allowLinkLocal": "true",
            "webhooks.urls": "http://127.0.0.1:9/hook, https://hooks.example/x",
            "webhooks.secret": "a-webhook-secret-of-some-length", "downloads.window": "22:00-06:00", "downloads.dailyLimit": "5GiB",
        ]
        let defaults = HLSCacheSettings()
        for key in SettingCatalog.all {
            let value = samples[key.name] ?? key.fileValue(defaults)
            let loaded = try SettingsLoader.load(configFile: nil, environment: [key.environmentName: value])
            #expect(loaded.sources[key.name] == "env \(key.environmentName)", "\(key.name) not read from \(key.environmentName)")
        }
        #expect(SettingCatalog.key("cache.maxSize")?.environmentName == "HLSCACHE_CACHE_MAX_SIZE")
        #expect(SettingCatalog.key("cache.dir")?.environmentName == "HLSCACHE_CACHE_DIR")
        #expect(SettingCatalog.key("limits.requestHeadTimeout")?.environmentName == "HLSCACHE_LIMITS_REQUEST_HEAD_TIMEOUT")
        #expect(SettingCatalog.key("limits.requestBodyTimeout")?.environmentName == "HLSCACHE_LIMITS_REQUEST_BODY_TIMEOUT")
        #expect(SettingCatalog.key("limits.sendTimeout")?.environmentName == "HLSCACHE_LIMITS_SEND_TIMEOUT")

        let lists = try SettingsLoader.load(configFile: nil, environment: ["HLSCACHE_ORIGIN_ALLOWED_HOSTS": "a.example, b.example"])
        #expect(lists.settings.originAllowedHosts == ["a.example", "b.example"])
        #expect(lists.settings.originConfiguration().destinationPolicy.allowedHosts == ["a.example", "b.example"])
    }

    @Test func fileValuesReachTheModuleConfigurations() throws {
        let fixture = try ConfigFixture()
        let file = try fixture.write(
            """
            listen: "[::1]:8181"
            cache:
              dir: /tmp/hlscache-config-test
              volatileQueryParameters: [sig]
            limits:
              idleTimeout: 90s
              requestHeadTimeout: 500ms
              requestBodyTimeout: 3s
              sendTimeout: 2m
            origin:
              connectTimeout: 2s
              retries: 0
              allowPrivateNetworks: no
              proxy: proxy.internal:3128
            keys:
              ttl: 7d
              allow: [192.168.1.0/24]
            downloads:
              concurrentItems: 5
              rateLimit: 2MiB
            origins:
              CDN.example.com:
                headers:
                  Referer: https://player.example/
                cookies:
                  session: abc
            """)
        let settings = try SettingsLoader.load(configFile: file, environment: [:]).settings
        let proxy = settings.proxyConfiguration(environment: [:])
        #expect(proxy.host == "::1" && proxy.port == 8181)
        #expect(proxy.cacheDirectory == "/tmp/hlscache-config-test")
        #expect(proxy.volatileQueryParameters == ["sig"])
        #expect(proxy.idleTimeout == .seconds(90))
        #expect(proxy.requestHeadTimeout == .milliseconds(500))
        #expect(proxy.requestBodyTimeout == .seconds(3))
        #expect(proxy.sendTimeout == .seconds(120))
        let origin = settings.originConfiguration()
        #expect(origin.connectTimeout == .seconds(2))
        #expect(origin.retry.maxRetries == 0)
        #expect(origin.destinationPolicy.allowPrivateNetworks == false)
        #expect(origin.originHeaders["cdn.example.com"]?.first?.name == "Referer")
        #expect(origin.originCookies["cdn.example.com"]?.first?.value == "abc")
        #expect(settings.originConfiguration(retries: 0).retry.maxRetries == 0)
        let keys = settings.keyConfiguration()
        #expect(keys.ttl == .seconds(7 * 86_400))
        #expect(keys.access.allowedNetworks.count == 1)
        #expect(keys.volatileQueryParameters == ["sig"])
        let downloads = settings.downloaderConfiguration()
        #expect(downloads.concurrentItems == 5)
        #expect(downloads.bytesPerSecond == 2 << 20)
        #expect(downloads.volatileQueryParameters == ["sig"])

        // A flag header replaces the file's header of the same name for that host.
        var flags = CommandLineSettings()
        flags.originHeaders = [("cdn.example.com", HLSCacheSettings.Field(name: "referer", value: "https://other.example/"))]
        let overridden = try SettingsLoader.load(configFile: file, environment: [:], commandLine: flags)
        #expect(
            overridden.settings.origins["cdn.example.com"]?.headers == [
                HLSCacheSettings.Field(name: "referer", value: "https://other.example/")
            ])
        #expect(overridden.sources["origins.cdn.example.com.headers.referer"] == "--origin-header")
    }

    @Test func printConfigNamesSourcesAndMasksSecrets() throws {
        let fixture = try ConfigFixture()
        let file = try fixture.write(
            "api:\n  token: hunter2-hunter2-hunter2\norigins:\n  cdn.example.com:\n    headers:\n      X-Token: abc123\n")
        let loaded = try SettingsLoader.load(configFile: file, environment: ["HLSCACHE_LOG_LEVEL": "debug"])
        let text = loaded.printableConfiguration(environment: ["HOME": "/home/someone"])
        #expect(text.contains("api.token = ********  # \(file)"))
        #expect(text.contains("origins.cdn.example.com.headers.X-Token = ********  # \(file)"))
        #expect(text.contains("log.level = debug  # env HLSCACHE_LOG_LEVEL"))
        #expect(text.contains("listen = 127.0.0.1:8080  # default"))
        #expect(text.contains("cache.dir = ~  (/home/someone/.cache/hlscache)  # default"))
        #expect(!text.contains("hunter2"))
        #expect(!text.contains("abc123"))
    }

    @Test func durationsAndSizes() {
        #expect(SettingText.duration("500ms") == .milliseconds(500))
        #expect(SettingText.duration("10s") == .seconds(10))
        #expect(SettingText.duration("1.5m") == .seconds(90))
        #expect(SettingText.duration("24h") == .seconds(86_400))
        #expect(SettingText.duration("7d") == .seconds(604_800))
        #expect(SettingText.duration("90") == .seconds(90))
        #expect(SettingText.duration("ten") == nil)
        #expect(SettingText.duration("10x") == nil)
        #expect(SettingText.duration("-5s") == nil)
        #expect(SettingText.duration("") == nil)
        for duration: Duration in [
            .milliseconds(200), .seconds(10), .seconds(60), .seconds(86_400), .seconds(3 * 86_400), .milliseconds(1500),
        ] {
            #expect(SettingText.duration(SettingText.format(duration)) == duration)
        }
        for bytes: Int64 in [0, 4096, 100 << 20, 10 << 30, 1536, 1000] {
            #expect(SettingText.size(SettingText.format(bytes: bytes)) == bytes)
        }
        #expect(SettingText.format(bytes: 10 << 30) == "10GiB")
        #expect(SettingText.format(.seconds(86_400)) == "24h")
        #expect(SettingText.format(.seconds(7 * 86_400)) == "7d")
        #expect(SettingText.format(.milliseconds(200)) == "200ms")
    }
}
