module schedlab/peers/go/fib

go 1.22
