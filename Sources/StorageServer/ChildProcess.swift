public import ProcessKit

/// `ProcessKit.ChildProcess`, under the name the test server's users have always imported it by:
/// code that imports only `StorageServer` (the tests, the benchmark and chaos tools) keeps
/// spawning with it. New code imports `ProcessKit`.
public typealias ChildProcess = ProcessKit.ChildProcess
