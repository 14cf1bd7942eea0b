import Foundation
import ItemCache
import ToolSupport
import Transport

/// One step of a scripted HTTP scenario (bench/cache_scenario.py writes the list): at `t`
/// seconds after the start, either load resource `res` through the cache (`get`) or tell the
/// server to change it (`change`, a GET of its control URL, which the server does not count).
struct ScenarioStep: Decodable {
    var t: Double
    var op: String
    var res: String
}

/// Replays a scenario against bench/cache_scenario.py's server through ``ItemLoader`` with the
/// server's freshness rules (`CacheConfiguration.loading.freshness = .server`, every other setting at its
/// default) in an empty cache folder, and prints one JSON line per get: what came back, from
/// where, and when. requests-cache replays the same steps; the Python side counts and judges.
///
/// Each request carries `X-Scenario-Step`, a header that does not vary the response (it is not
/// part of the key), so the server can tell which step asked.
func runScenario(_ options: ToolOptions) async throws {
    let base = try options.string("base")
    let stepsPath = try options.string("steps")
    let startText = try options.string("start")
    guard let start = Double(startText) else {
        throw ToolFailure("--start '\(startText)' is not a UNIX time in seconds")
    }
    let stepsData =
        stepsPath == "-"
        ? FileHandle.standardInput.readDataToEndOfFile() : try Data(contentsOf: URL(fileURLWithPath: stepsPath))
    let steps = try JSONDecoder().decode([ScenarioStep].self, from: stepsData)

    var transportConfiguration = CurlTransport.Configuration()
    transportConfiguration.retry = .none
    let transport = try CurlTransport(configuration: transportConfiguration)
    var configuration = CacheConfiguration(folder: try options.string("folder"))
    configuration.loading.freshness = .server
    let store = try ItemStore(configuration: configuration)
    let loader = ItemLoader(store: store, configuration: configuration, transport: transport)

    for (index, step) in steps.enumerated() {
        // The scenario's clock is the wall clock: the server's Date, Expires and max-age are in it.
        let wait = start + step.t - Date().timeIntervalSince1970
        if wait > 0 { try await Task.sleep(for: .milliseconds(Int64(wait * 1000))) }
        let late = max(0, Date().timeIntervalSince1970 - (start + step.t))
        switch step.op {
        case "get":
            guard let url = URL(string: "\(base)/r/\(step.res)") else {
                throw ToolFailure("bad resource name '\(step.res)'")
            }
            let t0 = Date().timeIntervalSince1970
            let loaded = try await loader.item(for: url, options: LoadOptions(headers: ["X-Scenario-Step": "\(index)"]))
            let t1 = Date().timeIntervalSince1970
            let head = loaded.data.prefix(while: { $0 != UInt8(ascii: "\n") })
            emit([
                "step": index, "res": step.res, "t0": t0, "t1": t1, "late": late, "bytes": loaded.data.count,
                "head": String(decoding: head, as: UTF8.self), "source": "\(loaded.source)",
                "error": loaded.fetchError.map { "\($0)" } ?? "",
            ])
        case "change":
            guard let url = URL(string: "\(base)/_control/change?res=\(step.res)") else {
                throw ToolFailure("bad resource name '\(step.res)'")
            }
            let response = try await transport.data(for: HTTPRequest(url: url))
            guard response.statusCode == 200 else {
                throw ToolFailure("the control request for \(step.res) got \(response.statusCode)")
            }
        default:
            throw ToolFailure("step \(index): unknown op '\(step.op)'; expected get or change")
        }
    }
    try await loader.close()
    await transport.shutdown()
}
