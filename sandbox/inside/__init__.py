"""What runs inside the sandbox: the worker, its fork server, its warm runner, CPU timers and seeding."""
