import Foundation
import HLSPlaylist

/// Which renditions of a multivariant playlist an item downloads (`--variants`, `--audio`, `--subtitles`,
/// `--iframes`).
package struct RenditionSelection: Sendable, Hashable, Codable {
    /// Which `EXT-X-STREAM-INF` variants.
    package enum Variants: Sendable, Hashable, Codable {
        /// Every variant.
        case all
        /// The one with the highest BANDWIDTH.
        case best
        /// The one with the lowest BANDWIDTH.
        case worst
        /// Every variant whose BANDWIDTH is at most this many bits/s (the lowest one if none is).
        case maxBandwidth(UInt64)
    }

    /// Which alternative renditions (`EXT-X-MEDIA`) of one type.
    package enum Languages: Sendable, Hashable, Codable {
        /// Every rendition in the groups the chosen variants name.
        case all
        /// None: players fall back to the origin (through the proxy) for them.
        case none
        /// Those whose LANGUAGE starts with one of these tags (`en` matches `en-US`), case-insensitively.
        case only([String])
    }

    package var variants: Variants
    package var audio: Languages
    package var subtitles: Languages
    /// Whether I-frame playlists (`EXT-X-I-FRAME-STREAM-INF`) of the chosen bandwidths are downloaded too.
    package var iFrames: Bool

    /// Everything but I-frame playlists.
    package init(variants: Variants = .all, audio: Languages = .all, subtitles: Languages = .all, iFrames: Bool = false) {
        self.variants = variants
        self.audio = audio
        self.subtitles = subtitles
        self.iFrames = iFrames
    }

    /// Where the values came from, so that an error names what the user wrote: a flag of `hlscache fetch`
    /// (`--variants xx: …`) or a field of the admin API's JSON body (`"variants": …`).
    package enum Source: Sendable {
        case commandLine, json

        /// The message for a bad `value` of `field` (`variants`, `audio`, `subtitles`).
        func problem(_ field: String, _ value: String, _ expectation: String) -> String {
            switch self {
            case .commandLine: "--\(field) \(value): \(expectation)"
            case .json: "\"\(field)\": \(expectation), not \"\(value)\""
            }
        }
    }

    /// Parses the CLI spellings (also those of the admin API): `all|best|worst|<bits/s>` (`800k`, `1.5M`
    /// accepted) and `all|none|en,fr`.
    /// - Throws: ``DownloadError/invalidState`` naming the bad value and the flag or field it came from.
    package init(variants: String, audio: String, subtitles: String, iFrames: Bool, source: Source = .commandLine) throws(DownloadError) {
        self.variants = try Self.parseVariants(variants, source: source)
        self.audio = try Self.parseLanguages(audio, field: "audio", source: source)
        self.subtitles = try Self.parseLanguages(subtitles, field: "subtitles", source: source)
        self.iFrames = iFrames
    }

    private static func parseVariants(_ text: String, source: Source) throws(DownloadError) -> Variants {
        switch text.lowercased() {
        case "all": return .all
        case "best": return .best
        case "worst": return .worst
        default:
            let lower = text.lowercased()
            var multiplier = 1.0
            var digits = Substring(lower)
            if lower.hasSuffix("k") {
                multiplier = 1e3; digits = digits.dropLast()
            } else if lower.hasSuffix("m") {
                multiplier = 1e6; digits = digits.dropLast()
            }
            guard let number = Double(digits), number > 0, number * multiplier < 1e12 else {
                throw DownloadError.invalidState.with(
                    source.problem("variants", text, "expected all, best, worst or a bandwidth cap in bits/s (e.g. 800k)"))
            }
            return .maxBandwidth(UInt64(number * multiplier))
        }
    }

    private static func parseLanguages(_ text: String, field: String, source: Source) throws(DownloadError) -> Languages {
        switch text.lowercased() {
        case "all": return .all
        case "none": return .none
        default:
            let tags = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard !tags.isEmpty else {
                throw DownloadError.invalidState.with(source.problem(field, text, "expected all, none or languages like en,fr"))
            }
            return .only(tags)
        }
    }

    /// The media playlists to download from `master`, without duplicates, variants first.
    package func select(from master: MasterPlaylist) -> [SelectedPlaylist] {
        let chosen = chooseVariants(master.variants)
        var result: [SelectedPlaylist] = []
        var seen: Set<String> = []
        func add(_ playlist: SelectedPlaylist) {
            if seen.insert(playlist.url).inserted { result.append(playlist) }
        }
        for variant in chosen {
            add(
                SelectedPlaylist(
                    url: variant.url, role: .variant, bandwidth: variant.bandwidth ?? variant.averageBandwidth,
                    name: variant.resolution.map { "\($0.width)x\($0.height)" }, language: nil))
        }
        let audioGroups = Set(chosen.compactMap(\.audioGroup))
        let videoGroups = Set(chosen.compactMap(\.videoGroup))
        let subtitleGroups = Set(chosen.compactMap(\.subtitlesGroup))
        for rendition in master.renditions {
            guard let url = rendition.url else { continue }
            let wanted: Bool
            let role: SelectedPlaylist.Role
            switch rendition.type {
            case .audio?:
                role = .audio
                wanted = audioGroups.contains(rendition.groupID) && Self.matches(rendition.language, audio)
            case .video?:
                role = .video
                wanted = videoGroups.contains(rendition.groupID)
            case .subtitles?:
                role = .subtitles
                wanted = subtitleGroups.contains(rendition.groupID) && Self.matches(rendition.language, subtitles)
            case .closedCaptions?, nil:
                continue
            }
            if wanted { add(SelectedPlaylist(url: url, role: role, bandwidth: nil, name: rendition.name, language: rendition.language)) }
        }
        if iFrames {
            // The same rule (all, best, worst, cap) applied to the I-frame variants' own bandwidths.
            for variant in chooseVariants(master.iFrameVariants) {
                add(SelectedPlaylist(url: variant.url, role: .iFrames, bandwidth: variant.bandwidth, name: nil, language: nil))
            }
        }
        return result
    }

    private func chooseVariants(_ listed: [Variant]) -> [Variant] {
        guard !listed.isEmpty else { return [] }
        let bandwidth: (Variant) -> UInt64 = { $0.bandwidth ?? $0.averageBandwidth ?? 0 }
        if case .all = variants { return listed }
        // best, worst and a cap pick among the variants with video: an audio-only variant (ffmpeg's masters list
        // the audio renditions as variants too) is the "worst" by bandwidth but plays no picture.
        let withVideo = listed.filter { !Self.isAudioOnly($0) }
        let all = withVideo.isEmpty ? listed : withVideo
        switch variants {
        case .all: return all
        case .best: return [all.max { bandwidth($0) < bandwidth($1) }!]
        case .worst: return [all.min { bandwidth($0) < bandwidth($1) }!]
        case .maxBandwidth(let cap):
            let fitting = all.filter { bandwidth($0) <= cap }
            return fitting.isEmpty ? [all.min { bandwidth($0) < bandwidth($1) }!] : fitting
        }
    }

    /// A variant whose CODECS are all audio codecs and that has no RESOLUTION.
    static func isAudioOnly(_ variant: Variant) -> Bool {
        guard variant.resolution == nil, variant.videoGroup == nil, let codecs = variant.codecs else { return false }
        let audio = ["mp4a", "ac-3", "ec-3", "ac-4", "opus", "flac", "fla", "alac", "dtsc", "dtse", "dtsh", "dtsl", "mp3", ".mp3"]
        let list = codecs.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return !list.isEmpty && list.allSatisfy { codec in audio.contains { codec == $0 || codec.hasPrefix($0 + ".") } }
    }

    /// Language tags match when equal or when one is a prefix subtag of the other (BCP 47): `en` selects `en-US`,
    /// and `en-US` selects a rendition labelled `en`.
    private static func matches(_ language: String?, _ filter: Languages) -> Bool {
        switch filter {
        case .all: return true
        case .none: return false
        case .only(let tags):
            guard let language = language?.lowercased() else { return false }
            return tags.contains { tag in
                let tag = tag.lowercased()
                return language == tag || language.hasPrefix(tag + "-") || tag.hasPrefix(language + "-")
            }
        }
    }

    /// What the selection asked for and the master does not have: `--audio de` on a stream with English and
    /// French audio selects no audio, which the user should hear about.
    package func unmatched(in master: MasterPlaylist) -> [String] {
        let chosen = chooseVariants(master.variants)
        var notes: [String] = []
        func check(_ filter: Languages, _ type: Rendition.MediaType, groups: Set<String>, option: String, what: String) {
            guard case .only(let tags) = filter else { return }
            let offered = master.renditions.filter { $0.type == type && groups.contains($0.groupID) && $0.url != nil }
            guard !offered.isEmpty, !offered.contains(where: { Self.matches($0.language, filter) }) else { return }
            let languages = Array(Set(offered.map { $0.language ?? "unlabelled" })).sorted().joined(separator: ", ")
            notes.append(
                "\(option) \(tags.joined(separator: ",")) matches no \(what) rendition of the chosen variants (they have: \(languages)); none is downloaded"
            )
        }
        check(audio, .audio, groups: Set(chosen.compactMap(\.audioGroup)), option: "--audio", what: "audio")
        check(subtitles, .subtitles, groups: Set(chosen.compactMap(\.subtitlesGroup)), option: "--subtitles", what: "subtitles")
        return notes
    }
}

/// A media playlist chosen by a ``RenditionSelection``.
package struct SelectedPlaylist: Sendable, Hashable, Codable {
    /// Where it comes from in the master.
    package enum Role: String, Sendable, Hashable, Codable {
        case variant, audio, video, subtitles, iFrames, media
    }

    /// Its absolute origin URL.
    package var url: String
    package var role: Role
    /// The variant's BANDWIDTH (bits/s), for estimates.
    package var bandwidth: UInt64?
    /// The rendition's NAME, or the variant's resolution.
    package var name: String?
    package var language: String?

    /// A selected playlist.
    package init(url: String, role: Role, bandwidth: UInt64?, name: String?, language: String?) {
        self.url = url
        self.role = role
        self.bandwidth = bandwidth
        self.name = name
        self.language = language
    }
}
