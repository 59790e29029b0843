module schedlab/peers/go/echo

go 1.22
