/// The view of a multivariant (master) playlist: variants, renditions and session-level data.
public struct MasterPlaylist: Sendable {
    public var version: Int?
    public var independentSegments = false
    public var start: StartPoint?
    public var variants: [Variant] = []
    public var iFrameVariants: [Variant] = []
    public var renditions: [Rendition] = []
    public var sessionData: [SessionData] = []
    public var sessionKeys: [Key] = []
    public var contentSteering: ContentSteering?
    /// Values of this playlist's variables, to pass as `imports` to its media playlists.
    public var variables: [String: String] = [:]

    /// The renditions of one group (`AUDIO`, `SUBTITLES`, ...).
    public func renditions(type: Rendition.MediaType, groupID: String) -> [Rendition] {
        renditions.filter { $0.type == type && $0.groupID == groupID }
    }
}

public struct Resolution: Sendable, Hashable {
    public var width: Int
    public var height: Int
}

/// An `EXT-X-STREAM-INF` (with its URI line) or an `EXT-X-I-FRAME-STREAM-INF`.
public struct Variant: Sendable, Hashable {
    public var uri: String
    public var url: String
    public var bandwidth: UInt64?
    public var averageBandwidth: UInt64?
    public var resolution: Resolution?
    public var codecs: String?
    public var frameRate: Double?
    public var audioGroup: String?
    public var videoGroup: String?
    public var subtitlesGroup: String?
    public var closedCaptionsGroup: String?
    public var hdcpLevel: String?
    public var videoRange: String?
    public var pathwayID: String?
    public var stableVariantID: String?
    /// 1-based line of the tag.
    public var line: Int
    public var attributes: AttributeList
}

/// An `EXT-X-MEDIA` alternative rendition.
public struct Rendition: Sendable, Hashable {
    public enum MediaType: String, Sendable, Hashable {
        case audio = "AUDIO", video = "VIDEO", subtitles = "SUBTITLES", closedCaptions = "CLOSED-CAPTIONS"
    }
    public var type: MediaType?
    public var groupID: String
    public var name: String
    public var language: String?
    public var associatedLanguage: String?
    public var isDefault: Bool
    public var autoselect: Bool
    public var forced: Bool
    public var instreamID: String?
    public var characteristics: String?
    public var channels: String?
    public var stableRenditionID: String?
    /// Nil for renditions carried inside the variant (closed captions, muxed audio).
    public var uri: String?
    public var url: String?
    public var line: Int
}

public struct SessionData: Sendable, Hashable {
    public var dataID: String
    public var value: String?
    public var uri: String?
    public var url: String?
    public var language: String?
}

public struct ContentSteering: Sendable, Hashable {
    public var serverURI: String
    public var serverURL: String
    public var pathwayID: String?
}

extension Playlist {
    /// The multivariant view. For a media playlist this is empty but for its variables.
    public func master(baseURL: String? = nil, imports: [String: String] = [:]) throws -> MasterPlaylist {
        let context = try ResolutionContext(playlist: self, baseURL: baseURL, imports: imports)
        var master = MasterPlaylist()
        master.variables = context.variables.all
        var pending: (attributes: AttributeList, line: Int)?
        for (index, line) in lines.enumerated() {
            let lineNumber = index + 1
            // Tolerant: a line whose value cannot be read is skipped, as a player skips it.
            do {
                switch line.kind {
                case .uri(.variant):
                    guard let inf = pending else { continue }
                    let (uri, url) = try context.reference(text(ofLine: index).trimmingLineSpace(), line: lineNumber)
                    master.variants.append(try makeVariant(inf.attributes, uri: uri, url: url, line: inf.line))
                    pending = nil
                case .tag(.streamInf):
                    pending = (try attributes(ofLine: index), lineNumber)
                case .tag(.iFrameStreamInf):
                    let a = try attributes(ofLine: index)
                    let (uri, url) = try context.reference(a["URI"] ?? "", line: lineNumber)
                    master.iFrameVariants.append(try makeVariant(a, uri: uri, url: url, line: lineNumber))
                case .tag(.media):
                    let a = try attributes(ofLine: index)
                    let reference = try a["URI"].map { try context.reference($0, line: lineNumber) }
                    master.renditions.append(
                        Rendition(
                            type: a["TYPE"].flatMap(Rendition.MediaType.init(rawValue:)), groupID: a["GROUP-ID"] ?? "",
                            name: a["NAME"] ?? "",
                            language: a["LANGUAGE"], associatedLanguage: a["ASSOC-LANGUAGE"], isDefault: a.flag("DEFAULT"),
                            autoselect: a.flag("AUTOSELECT"), forced: a.flag("FORCED"), instreamID: a["INSTREAM-ID"],
                            characteristics: a["CHARACTERISTICS"], channels: a["CHANNELS"], stableRenditionID: a["STABLE-RENDITION-ID"],
                            uri: reference?.uri, url: reference?.url, line: lineNumber))
                case .tag(.sessionData):
                    let a = try attributes(ofLine: index)
                    let reference = try a["URI"].map { try context.reference($0, line: lineNumber) }
                    master.sessionData.append(
                        SessionData(
                            dataID: a["DATA-ID"] ?? "", value: a["VALUE"], uri: reference?.uri, url: reference?.url, language: a["LANGUAGE"]
                        ))
                case .tag(.sessionKey):
                    master.sessionKeys.append(try makeKey(try attributes(ofLine: index), context: context, line: lineNumber))
                case .tag(.contentSteering):
                    let a = try attributes(ofLine: index)
                    let (uri, url) = try context.reference(a["SERVER-URI"] ?? "", line: lineNumber)
                    master.contentSteering = ContentSteering(serverURI: uri, serverURL: url, pathwayID: a["PATHWAY-ID"])
                case .tag(.version):
                    master.version = Int(
                        try Numbers.integer(tagValue(ofLine: index).trimmingLineSpace(), line: lineNumber, what: "version"))
                case .tag(.independentSegments): master.independentSegments = true
                case .tag(.start): master.start = try makeStart(try attributes(ofLine: index), line: lineNumber)
                default: continue
                }
            } catch is PlaylistError where isTolerant {
                continue
            }
        }
        return master
    }

    private func makeVariant(_ a: AttributeList, uri: String, url: String, line: Int) throws -> Variant {
        var resolution: Resolution?
        if let text = a["RESOLUTION"] {
            let parts = text.split(separator: "x")
            guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0, w <= 1 << 16, h <= 1 << 16 else {
                throw PlaylistError.invalidNumber.at(line: line, "RESOLUTION \(text) is not WIDTHxHEIGHT")
            }
            resolution = Resolution(width: w, height: h)
        }
        return Variant(
            uri: uri, url: url, bandwidth: try a.integer("BANDWIDTH", line: line, max: Numbers.maxBandwidth),
            averageBandwidth: try a.integer("AVERAGE-BANDWIDTH", line: line, max: Numbers.maxBandwidth), resolution: resolution,
            codecs: a["CODECS"], frameRate: try a.decimal("FRAME-RATE", line: line, range: 0...1000), audioGroup: a["AUDIO"],
            videoGroup: a["VIDEO"], subtitlesGroup: a["SUBTITLES"], closedCaptionsGroup: a["CLOSED-CAPTIONS"],
            hdcpLevel: a["HDCP-LEVEL"], videoRange: a["VIDEO-RANGE"], pathwayID: a["PATHWAY-ID"], stableVariantID: a["STABLE-VARIANT-ID"],
            line: line, attributes: a)
    }
}
