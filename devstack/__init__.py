"""The embedded AWS: the whole pipeline on a local server in one process tree, for `make run`,
the tests and `umavez serve`: DynamoDB and its streams, SQS and EventBridge in the project's
own memory (`devstack.memory`), the other services on moto as it ships. The server and its
resources (server.py, resources.py), the stack wired as CDK wires it (stack.py: the API front,
the pollers standing in for event source mappings and schedules, the sinks), fakes of the
providers' APIs, the capacity accounting of every request (accounting.py, capacity.py,
metering.py) and the metrics files the functions write."""
