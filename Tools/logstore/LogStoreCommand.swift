import ArgumentParser
@main struct LogStoreCommand: ParsableCommand {}
