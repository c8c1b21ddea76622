"""The runtime: grading one submission. `runner` (the facade) drives `forkclient` (its fork
servers) over `protocol`, reads each worker's lines with `stream`, turns them into `results`;
`sandbox` builds the walls each server runs in; `child` is the server and worker side, bound
into the walls with `protocol` (and `grader.suites.observe`); `pool` keeps runners for a batch;
`cleanup` and `escape` keep scratch folders and shown names safe.

Imports nothing: the walls import this package, where only the child runtime exists.
"""
