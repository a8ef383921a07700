// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6)
]

let package = Package(
    name: "hlscache",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "hlscache", targets: ["hlscache"]),
        .library(name: "HLSPlaylist", targets: ["HLSPlaylist"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // Pure playlist engine: no I/O, no NIO, no Foundation networking.
        .target(name: "HLSPlaylist", swiftSettings: swiftSettings),
        // The URL contract and cache-key rules shared by the proxy, the downloader and the CLI. Pure.
        .target(name: "HLSCacheCore", dependencies: ["HLSPlaylist"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "hlscache",
            dependencies: [
                "HLSCacheCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "PlaylistBenchmark",
            dependencies: ["HLSPlaylist"],
            path: "Benchmarks/PlaylistBenchmark",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HLSPlaylistTests", dependencies: ["HLSPlaylist"], exclude: ["Fixtures"], swiftSettings: swiftSettings),
        .testTarget(name: "HLSCacheCoreTests", dependencies: ["HLSCacheCore"], swiftSettings: swiftSettings),
        .testTarget(name: "CLITests", dependencies: ["hlscache"], swiftSettings: swiftSettings),
    ]
)
