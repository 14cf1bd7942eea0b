// The app's code lives in Tests/DocumentationExamples, where `make test` compiles and runs it.
